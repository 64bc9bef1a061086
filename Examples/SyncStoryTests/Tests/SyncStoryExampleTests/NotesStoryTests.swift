import Foundation
import SteleSimulator
import SyncStories
import Testing

/// The app's sync stories, run in the deterministic simulator: the shipped sync
/// code over a seeded virtual network and clock, judged by the oracle.
@Suite struct NotesStoryTests {
    /// Parses and runs a story; a failing `expect` throws a `ScenarioFailure`
    /// naming its line, what was expected and what was found, and the seed.
    func tell(_ story: String, file: String, seed: UInt64) throws -> ScenarioRunner {
        let runner = try ScenarioRunner(scenario: try ScenarioParser.parse(story, file: file), seed: seed)
        try runner.run()
        return runner
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aNoteDeletedWhileTheIPadSleepsStaysDeleted(seed: UInt64) throws {
        let runner = try tell(NotesStories.sleepingIPad, file: "sleeping-ipad.scenario", seed: seed)
        // The verdict: every expectation held, and the oracle counted nothing back from the dead.
        #expect(runner.simulation.oracle.resurrections == 0)
        #expect(runner.simulation.oracle.lostWrites == 0)
    }

    @Test func anEditBeatsADeleteThatNeverSawIt() throws {
        let runner = try tell(NotesStories.deleteRacedTheEdit, file: "delete-raced-the-edit.scenario", seed: 1)
        #expect(runner.simulation.oracle.resurrections == 0)
    }

    /// A story whose promise does not hold fails at its line, with what was found.
    @Test func aBrokenPromiseNamesItsLine() throws {
        let story = NotesStories.sleepingIPad.replacingOccurrences(of: "expect all notes groceries absent", with: "expect all notes groceries = \"milk\"")
        let failure = #expect(throws: ScenarioFailure.self) { _ = try tell(story, file: "broken.scenario", seed: 1) }
        #expect(failure?.line == 13)
        #expect(failure?.file == "broken.scenario")
    }
}
