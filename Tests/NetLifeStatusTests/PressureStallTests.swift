// A pressure file's figures: read from the kernel's text (a cgroup's memory.pressure and /proc/pressure/memory
// write the same lines; /proc/pressure/cpu before Linux 5.13 has no `full` line), written back as the kernel
// writes them, and read back from their JSON as written.

import Testing
import NetLifeJSON
import NetLifeStatus

@Suite struct PressureStallTests {
    @Test func theKernelsLinesAreReadWithTheirAveragesAndTotals() throws {
        let text = "some avg10=5.79 avg60=1.04 avg300=0.21 total=659348\nfull avg10=4.50 avg60=0.80 avg300=0.17 total=512000\n"
        let stall = try #require(PressureStall(fileText: text, file: "/sys/fs/cgroup/x/memory.pressure"))
        #expect(stall == PressureStall(file: "/sys/fs/cgroup/x/memory.pressure", some: PressureFigures(avg10: 5.79, avg60: 1.04, total: 659_348),
                                       full: PressureFigures(avg10: 4.5, avg60: 0.8, total: 512_000)))
        #expect(stall.text == "some avg10=5.79 avg60=1.04 total=659348, full avg10=4.50 avg60=0.80 total=512000")
        #expect(try PressureStall(json: JSON.parse(stall.json.serialized)) == stall)
    }

    @Test func aFileWithoutAFullLineHasNoFullFigures() throws {
        let stall = try #require(PressureStall(fileText: "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", file: "/proc/pressure/cpu"))
        #expect(stall.full == nil && stall.some == PressureFigures(avg10: 0, avg60: 0, total: 0))
        #expect(stall.text == "some avg10=0.00 avg60=0.00 total=0")
        #expect(stall.json["full"] == nil)
        #expect(try PressureStall(json: JSON.parse(stall.json.serialized)) == stall)
    }

    @Test func fieldsItDoesNotKnowAreSkippedAndAFileWithoutASomeLineIsNone() {
        let later = PressureStall(fileText: "some total=12 avg60=1.50 avg10=100.00 avg900=3\nfull broken\n", file: "f")
        #expect(later == PressureStall(file: "f", some: PressureFigures(avg10: 100, avg60: 1.5, total: 12)))
        for text in ["", "\n\n", "full avg10=1.00 avg60=1.00 total=1\n", "some avg10=1.00 total=1\n", "some avg10=x avg60=1 total=1\n",
                     "some avg10=nan avg60=1 total=1\n", "some avg10=1 avg60=1 total=-1\n", "sometimes avg10=1 avg60=1 total=1\n"] {
            #expect(PressureStall(fileText: text, file: "f") == nil, "\(text)")
        }
        #expect(PressureFigures(avg10: 0.05, avg60: 12.345, total: 1).text == "avg10=0.05 avg60=12.35 total=1")
    }

    @Test func aRecordWithoutSomeIsAnError() throws {
        #expect(throws: JSONRecordError("pressure needs \"some\"")) { try PressureStall(json: JSON.parse(#"{"file":"f"}"#)) }
    }
}
