// The adaptive read size: grows at once for a bulk stream, shrinks slowly for a chatty connection.

import NetLifeEvent
import Testing

struct ReadSizerTests {
    @Test func aFullReadMakesTheNextFourTimesLargerUpToTheLargest() {
        var sizer = ReadSizer()
        #expect(sizer.size == 4096 - 64)
        sizer.record(sizer.size)
        #expect(sizer.size == 16384 - 64)
        sizer.record(sizer.size)
        #expect(sizer.size == ReadSizer.largest)
        sizer.record(sizer.size)
        #expect(sizer.size == ReadSizer.largest)
    }

    @Test func twoSmallReadsInARowHalveTheSizeDownToTheSmallest() {
        var sizer = ReadSizer()
        sizer.record(64)
        #expect(sizer.size == 4096 - 64, "one small read changes nothing")
        sizer.record(64)
        #expect(sizer.size == 2048 - 64)
        for _ in 0..<10 { sizer.record(64) }
        #expect(sizer.size == ReadSizer.smallest)
        #expect(ReadSizer.smallest == 1024 - 64)
    }

    @Test func aReadBetweenHalfAndFullResetsTheShrinking() {
        var sizer = ReadSizer()
        sizer.record(64)
        sizer.record(3000)      // more than half of 4032
        sizer.record(64)
        #expect(sizer.size == 4096 - 64, "the small reads were not in a row")
        sizer.record(64)
        #expect(sizer.size == 2048 - 64)
    }
}
