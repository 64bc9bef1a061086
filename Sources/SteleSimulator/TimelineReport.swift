import Foundation

/// An SVG timeline of one run (`stele simulate --report FILE.svg`): one lane per
/// device (online or offline, backups, restores, crashes, joins; nothing once
/// revoked), the tombstone count over time until the last is collected, the
/// points where the fleet converged, and a time axis.
public enum TimelineReport {
    public static func svg(_ outcome: SimulationRun.Outcome) -> String {
        let devices = outcome.devices
        let width = 1_000.0
        let left = 90.0
        let laneHeight = 28.0
        let chartHeight = 120.0
        let top = 40.0
        let height = top + Double(devices.count) * laneHeight + chartHeight + 80
        let end = Double(max(outcome.endTime, 1))
        func x(_ time: Int64) -> Double { left + (width - left - 20) * Double(time) / end }
        func lane(_ device: String) -> Double { top + Double(devices.firstIndex(of: device) ?? 0) * laneHeight }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="11">
            <rect width="100%" height="100%" fill="white"/>
            <text x="10" y="20" font-size="13">Stele simulation, seed \(outcome.seed): \(outcome.operations) writes, \(outcome.resurrections) resurrections, \(outcome.lostWrites) lost writes</text>

            """
        // Lanes: green while online, grey while offline; nothing once revoked (the device is off the roster).
        for device in devices {
            let y = lane(device)
            svg += "<text x=\"10\" y=\"\(y + 15)\">\(escape(device))</text>\n"
            var online = true
            var since: Int64 = 0
            var removed = false
            let entries = outcome.timeline.filter { $0.device == device }
            for entry in entries where !removed {
                switch entry.kind {
                case .revoked:
                    svg += bar(x(since), x(entry.time), y, online)
                    svg += mark(x(entry.time), y, "#000000", "revoked")
                    svg += "<text x=\"\(x(entry.time) + 5)\" y=\"\(y + 16)\" fill=\"#555555\">revoked</text>\n"
                    removed = true
                case .offline, .online:
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
            if !removed { svg += bar(x(since), x(outcome.endTime), y, online) }
        }
        // Tombstones over time.
        let chartTop = top + Double(devices.count) * laneHeight + 20
        let counts: [(Int64, Int)] = outcome.timeline.compactMap { entry in
            if case .tombstones(let count) = entry.kind { return (entry.time, count) } else { return nil }
        }
        let highest = Double(max(counts.map(\.1).max() ?? 1, 1))
        svg += "<text x=\"10\" y=\"\(chartTop + 12)\">tombstones</text>\n"
        svg += "<text x=\"10\" y=\"\(chartTop + 26)\">(max \(Int(highest)))</text>\n"
        // A step line: each count holds until the next one, the last until the end of the run.
        func level(_ count: Int) -> Double { chartTop + chartHeight - chartHeight * Double(count) / highest }
        var steps: [String] = []
        for (index, point) in counts.enumerated() {
            steps.append("\(x(point.0)),\(level(point.1))")
            let next = index + 1 < counts.count ? counts[index + 1].0 : outcome.endTime
            steps.append("\(x(next)),\(level(point.1))")
        }
        svg += "<polyline fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"1.5\" points=\"\(steps.joined(separator: " "))\"/>\n"
        // The time axis, in virtual time.
        let axisY = chartTop + chartHeight
        svg += "<line x1=\"\(left)\" x2=\"\(width - 20)\" y1=\"\(axisY)\" y2=\"\(axisY)\" stroke=\"#333333\"/>\n"
        let tick = tickInterval(for: Int64(end))
        var time: Int64 = 0
        while time <= Int64(end) {
            svg += "<line x1=\"\(x(time))\" x2=\"\(x(time))\" y1=\"\(axisY)\" y2=\"\(axisY + 4)\" stroke=\"#333333\"/>\n"
            svg += "<text x=\"\(x(time))\" y=\"\(axisY + 15)\" text-anchor=\"middle\">\(label(time))</text>\n"
            time += tick
        }
        svg += "<text x=\"10\" y=\"\(axisY + 15)\">virtual time</text>\n"
        // Convergence points.
        for entry in outcome.timeline {
            guard case .converged = entry.kind else { continue }
            svg += "<line x1=\"\(x(entry.time))\" x2=\"\(x(entry.time))\" y1=\"\(top - 5)\" y2=\"\(chartTop + chartHeight)\" stroke=\"#2ca02c\" stroke-dasharray=\"3,3\"/>\n"
        }
        let legendY = chartTop + chartHeight + 34
        svg += "<text x=\"10\" y=\"\(legendY)\">lanes: green online, grey offline, none once revoked (black mark); marks: red crash, blue backup, purple restore,</text>\n"
        svg += "<text x=\"10\" y=\"\(legendY + 14)\">cyan the anchor written, green a new generation; dashed green: the fleet converged; orange: tombstones retained across the fleet</text>\n"
        svg += "</svg>\n"
        return svg
    }

    /// A round step between ticks for a run `end` milliseconds long: about eight ticks.
    static func tickInterval(for end: Int64) -> Int64 {
        let steps: [Int64] = [1_000, 5_000, 10_000, 30_000, 60_000, 300_000, 600_000, 1_800_000, 3_600_000, 21_600_000, 86_400_000, 604_800_000]
        return steps.first { end / $0 <= 8 } ?? 604_800_000 * max(1, end / 604_800_000 / 8)
    }

    /// A tick's label: seconds, minutes, hours or days of virtual time.
    static func label(_ time: Int64) -> String {
        if time == 0 { return "0" }
        if time % 86_400_000 == 0 { return "\(time / 86_400_000) d" }
        if time % 3_600_000 == 0 { return "\(time / 3_600_000) h" }
        if time % 60_000 == 0 { return "\(time / 60_000) min" }
        return "\(time / 1_000) s"
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
