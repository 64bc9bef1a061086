import Foundation
import SteleHub
import SteleHubPostgres
import Testing
import TestSupport

/// PostgreSQL lost and back: the hub answers 503 meanwhile and recovers
/// without being restarted.
@Suite(.serialized) struct HubPostgresOutageTests {
    @Test func theHubAnswers503WhilePostgreSQLIsDownAndRecoversOnItsOwn() throws {
        let cluster = try PostgresTestCluster.start()
        defer { PostgresTestCluster.remove(cluster) }
        let storage = try PostgresHubStorage(url: "postgresql://postgres@127.0.0.1:\(cluster.port)/postgres")
        defer { storage.close() }
        let service = HubService(storage: storage)
        func health() -> HubResponse { service.handle(HubRequest(method: "GET", target: "/v1/health")).response ?? HubResponse(status: 0) }
        #expect(health().status == 200)
        try PostgresTestCluster.stop(cluster)
        let down = health()
        #expect(down.status == 503)
        #expect(down.headers["Retry-After"] == "1")
        #expect(down.errorCode == "unavailable")
        try PostgresTestCluster.restart(cluster)
        var status = 0
        for _ in 0..<20 where status != 200 {
            status = health().status
            if status != 200 { usleep(250_000) }
        }
        #expect(status == 200)
        // And it writes again.
        #expect(try service.createInvite().count == 24)
    }
}
