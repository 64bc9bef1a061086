extension Replica {
    /// Turns a merge outcome into the change events it implies.
    func emitOutcome(_ outcome: MergeOutcome, namespace: String, subject: ChangeEvent.Subject, origin: ChangeEvent.Origin = .remote) {
        let kind: ChangeEvent.Kind? =
            switch outcome.effect {
            case .inserted: .inserted
            case .updated: .updated
            case .deleted: .deleted
            case .unchanged, .recorded, .discarded: nil
            }
        if let kind { emit(ChangeEvent(namespace: namespace, subject: subject, kind: kind, origin: origin)) }
        if let conflict = outcome.conflict {
            emit(ChangeEvent(namespace: namespace, subject: subject, kind: .conflict(conflict), origin: .remote))
        }
    }
}
