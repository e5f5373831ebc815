// The adaptive read size: starts small, grows at once for a bulk stream, shrinks slowly for a chatty
// connection.

import NetLifeEvent
import Testing

struct ReadSizerTests {
    /// A new connection reads little: a chatty peer's first message lands in the scratch area, and no input
    /// buffer is made for it.
    @Test func aNewConnectionStartsAtTheSmallestSize() {
        let sizer = ReadSizer()
        #expect(sizer.size == ReadSizer.smallest)
        #expect(sizer.isSmallest)
        #expect(ReadSizer.smallest == 1024 - 64)
    }

    @Test func aFullReadMakesTheNextFourTimesLargerUpToTheLargest() {
        var sizer = ReadSizer()
        sizer.record(sizer.size)
        #expect(sizer.size == 4096 - 64)
        #expect(!sizer.isSmallest)
        sizer.record(sizer.size)
        #expect(sizer.size == 16384 - 64)
        sizer.record(sizer.size)
        #expect(sizer.size == 65536 - 64)
        sizer.record(sizer.size)
        #expect(sizer.size == ReadSizer.largest)
        #expect(ReadSizer.largest == 262144 - 64)
        sizer.record(sizer.size)
        #expect(sizer.size == ReadSizer.largest)
    }

    @Test func twoSmallReadsInARowHalveTheSizeDownToTheSmallest() {
        var sizer = ReadSizer()
        sizer.record(sizer.size)
        #expect(sizer.size == 4096 - 64)
        sizer.record(64)
        #expect(sizer.size == 4096 - 64, "one small read changes nothing")
        sizer.record(64)
        #expect(sizer.size == 2048 - 64)
        for _ in 0..<10 { sizer.record(64) }
        #expect(sizer.size == ReadSizer.smallest)
        #expect(sizer.isSmallest)
    }

    @Test func aReadBetweenHalfAndFullResetsTheShrinking() {
        var sizer = ReadSizer()
        sizer.record(sizer.size)
        sizer.record(64)
        sizer.record(3000)      // more than half of 4032
        sizer.record(64)
        #expect(sizer.size == 4096 - 64, "the small reads were not in a row")
        sizer.record(64)
        #expect(sizer.size == 2048 - 64)
    }
}
