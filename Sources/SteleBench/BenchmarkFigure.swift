/// One figure `stele bench` reports: a measured value and, where the issue names
/// one, the baseline run in the same process and the ratio Stele ÷ baseline.
public struct BenchmarkFigure: Sendable, Codable, Equatable {
    public let name: String
    public let value: Double
    public let unit: String
    public let baseline: Double?
    public let ratio: Double?
    /// The target the figure is held to, as text (`"ratio >= 0.5"`), when there is one.
    public let target: String?
    /// Whether the figure meets its target (`nil` when it has none).
    public let met: Bool?

    public init(name: String, value: Double, unit: String, baseline: Double? = nil, target: Target? = nil) {
        self.name = name
        self.value = value
        self.unit = unit
        self.baseline = baseline
        let ratio = baseline.map { $0 == 0 ? 0 : value / $0 }
        self.ratio = ratio
        self.target = target?.description
        self.met = target?.isMet(value: value, ratio: ratio)
    }

    /// A bound on a figure's value or ratio.
    public enum Target: Sendable, CustomStringConvertible {
        case ratioAtLeast(Double)
        case ratioAtMost(Double)
        case valueAtMost(Double)
        case valueAtLeast(Double)

        func isMet(value: Double, ratio: Double?) -> Bool {
            switch self {
            case .ratioAtLeast(let bound): (ratio ?? 0) >= bound
            case .ratioAtMost(let bound): (ratio ?? .infinity) <= bound
            case .valueAtMost(let bound): value <= bound
            case .valueAtLeast(let bound): value >= bound
            }
        }

        public var description: String {
            switch self {
            case .ratioAtLeast(let bound): "ratio >= \(bound)"
            case .ratioAtMost(let bound): "ratio <= \(bound)"
            case .valueAtMost(let bound): "value <= \(bound)"
            case .valueAtLeast(let bound): "value >= \(bound)"
            }
        }
    }

    private enum CodingKeys: String, CodingKey { case name, value, unit, baseline, ratio, target, met }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(value, forKey: .value)
        try container.encode(unit, forKey: .unit)
        // baseline and ratio appear only where the figure has them (the JSON shape).
        try container.encodeIfPresent(baseline, forKey: .baseline)
        try container.encodeIfPresent(ratio, forKey: .ratio)
        try container.encodeIfPresent(target, forKey: .target)
        try container.encodeIfPresent(met, forKey: .met)
    }
}
