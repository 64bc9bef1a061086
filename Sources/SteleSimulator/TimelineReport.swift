import Foundation

/// An SVG timeline of one run (`stele simulate --report FILE.svg`): one lane per
/// device (online or offline, backups, restores, crashes, joins), the tombstone
/// count over time, and the points where the fleet converged.
public enum TimelineReport {
    public static func svg(_ outcome: SimulationRun.Outcome) -> String {
        let devices = outcome.devices
        let width = 1_000.0
        let left = 90.0
        let laneHeight = 28.0
        let chartHeight = 120.0
        let top = 40.0
        let height = top + Double(devices.count) * laneHeight + chartHeight + 60
        let end = Double(max(outcome.endTime, 1))
        func x(_ time: Int64) -> Double { left + (width - left - 20) * Double(time) / end }
        func lane(_ device: String) -> Double { top + Double(devices.firstIndex(of: device) ?? 0) * laneHeight }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="11">
            <rect width="100%" height="100%" fill="white"/>
            <text x="10" y="20" font-size="13">Stele simulation, seed \(outcome.seed): \(outcome.operations) writes, \(outcome.resurrections) resurrections, \(outcome.lostWrites) lost writes</text>

            """
        // Lanes: green while online, grey while offline.
        for device in devices {
            let y = lane(device)
            svg += "<text x=\"10\" y=\"\(y + 15)\">\(escape(device))</text>\n"
            var online = true
            var since: Int64 = 0
            let entries = outcome.timeline.filter { $0.device == device }
            for entry in entries {
                switch entry.kind {
                case .offline, .online, .revoked:
                    svg += bar(x(since), x(entry.time), y, online)
                    online = { if case .online = entry.kind { return true } else { return false } }()
                    since = entry.time
                case .joined:
                    since = entry.time
                case .crashed: svg += mark(x(entry.time), y, "#d62728", "crash")
                case .backedUp: svg += mark(x(entry.time), y, "#1f77b4", "backup")
                case .restored: svg += mark(x(entry.time), y, "#9467bd", "restore")
                case .anchorWritten(let generation): svg += mark(x(entry.time), y, "#17becf", "anchor \(generation)")
                case .generation(let generation): svg += mark(x(entry.time), y, "#2ca02c", "generation \(generation)")
                default: break
                }
            }
            svg += bar(x(since), x(outcome.endTime), y, online)
        }
        // Tombstones over time.
        let chartTop = top + Double(devices.count) * laneHeight + 20
        let counts: [(Int64, Int)] = outcome.timeline.compactMap { entry in
            if case .tombstones(let count) = entry.kind { return (entry.time, count) } else { return nil }
        }
        let highest = Double(max(counts.map(\.1).max() ?? 1, 1))
        svg += "<text x=\"10\" y=\"\(chartTop + 12)\">tombstones</text>\n"
        svg += "<text x=\"10\" y=\"\(chartTop + 26)\">(max \(Int(highest)))</text>\n"
        let points = counts.map { "\(x($0.0)),\(chartTop + chartHeight - chartHeight * Double($0.1) / highest)" }.joined(separator: " ")
        svg += "<polyline fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"1.5\" points=\"\(points)\"/>\n"
        // Convergence points.
        for entry in outcome.timeline {
            guard case .converged = entry.kind else { continue }
            svg += "<line x1=\"\(x(entry.time))\" x2=\"\(x(entry.time))\" y1=\"\(top - 5)\" y2=\"\(chartTop + chartHeight)\" stroke=\"#2ca02c\" stroke-dasharray=\"3,3\"/>\n"
        }
        let legendY = chartTop + chartHeight + 30
        svg += "<text x=\"10\" y=\"\(legendY)\">lanes: green online, grey offline; marks: red crash, blue backup, purple restore; dashed green: converged; orange: tombstones retained</text>\n"
        svg += "</svg>\n"
        return svg
    }

    private static func bar(_ from: Double, _ to: Double, _ y: Double, _ online: Bool) -> String {
        guard to > from else { return "" }
        return "<rect x=\"\(from)\" y=\"\(y + 4)\" width=\"\(to - from)\" height=\"16\" fill=\"\(online ? "#98df8a" : "#c7c7c7")\"/>\n"
    }

    private static func mark(_ x: Double, _ y: Double, _ color: String, _ title: String) -> String {
        "<rect x=\"\(x - 2)\" y=\"\(y + 1)\" width=\"4\" height=\"22\" fill=\"\(color)\"><title>\(title)</title></rect>\n"
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
