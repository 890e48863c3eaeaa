//! The domain's [`DueRule`] (which deliveries are due for an attempt, and the order a lease
//! takes them in) as SQL. The rule is written once, in the domain; the store only translates
//! it, term by term: here into the text of the lease's candidates query (raw SQL on both
//! backends: a window that diesel's DSL does not write), and in `queries::webhooks` into the
//! diesel filters that lock picked deliveries and count held leases.

use gatehouse_domain::model::{DueKey, DueRule, TimeBound};

/// The SQL operator of `bound`, as in `time <op> now`.
pub(crate) const fn operator(bound: TimeBound) -> &'static str {
    match bound {
        TimeBound::AtOrBefore => "<=",
        TimeBound::Before => "<",
    }
}

/// How a backend writes what differs in the lease candidates' statement.
pub(crate) trait CandidatesSql {
    /// The deliveries table as the query reads it, aliased `d` (SQLite names its index).
    const DELIVERIES: &'static str;

    /// Parameter `n`, from 1.
    fn param(n: usize) -> String;

    /// `column` not among `count` values bound from parameter `first` on: the condition, and
    /// how many parameters it takes.
    fn not_among(column: &str, first: usize, count: usize) -> (String, usize);
}

/// The column of the candidates' query that orders by `key`.
const fn column(key: DueKey) -> &'static str {
    match key {
        DueKey::OrganizationTurn => "turn",
        DueKey::NextAttemptAt => "next_attempt_at",
        DueKey::Id => "id",
    }
}

/// The lease's candidates: the deliveries due at parameter 1 (`now`) by the [`DueRule`], but
/// those of `busy` endpoints and of `busy_organizations` organizations (bound from parameter
/// 2 on, the endpoints first), as `(id, endpoint_id, organization_id)` in the rule's order, at
/// most the last parameter (the limit). Nothing is locked.
pub(crate) fn lease_candidates<S: CandidatesSql>(busy: usize, busy_organizations: usize) -> String {
    let now = S::param(1);
    let (skip_endpoints, taken) = S::not_among("d.endpoint_id", 2, busy);
    let (skip_organizations, taken_too) =
        S::not_among("d.organization_id", 2 + taken, busy_organizations);
    let limit = S::param(2 + taken + taken_too);

    let statuses = DueRule::STATUSES
        .iter()
        .map(|status| format!("'{}'", status.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let mut due = vec![
        format!(
            "d.next_attempt_at {} {now}",
            operator(DueRule::ATTEMPT_TIME)
        ),
        format!(
            "(d.leased_until IS NULL OR d.leased_until {} {now})",
            operator(DueRule::LEASE_EXPIRED)
        ),
        format!("d.status IN ({statuses})"),
    ];
    if DueRule::ACTIVE_ENDPOINTS_ONLY {
        due.push(
            "d.endpoint_id IN (SELECT e.id FROM webhook_endpoints AS e WHERE e.is_active)".into(),
        );
    }
    due.extend([skip_endpoints, skip_organizations]);

    // A turn is counted in the order of the keys after it.
    let turn = DueRule::ORDER
        .iter()
        .position(|key| *key == DueKey::OrganizationTurn)
        .map(|at| {
            let within = DueRule::ORDER[at + 1..]
                .iter()
                .map(|key| format!("d.{}", column(*key)))
                .collect::<Vec<_>>();
            let within = if within.is_empty() {
                String::new()
            } else {
                format!(" ORDER BY {}", within.join(", "))
            };
            format!(", row_number() OVER (PARTITION BY d.organization_id{within}) AS turn")
        })
        .unwrap_or_default();
    let order = DueRule::ORDER
        .iter()
        .map(|key| format!("c.{}", column(*key)))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT c.id, c.endpoint_id, c.organization_id FROM ( \
           SELECT d.id, d.endpoint_id, d.organization_id, d.next_attempt_at{turn} \
           FROM {deliveries} \
           WHERE {due} \
         ) AS c \
         ORDER BY {order} \
         LIMIT {limit}",
        deliveries = S::DELIVERIES,
        due = due.join(" AND "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statement with its runs of white space made one space.
    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The candidates' statement the rule makes, with what a backend writes its own way.
    fn expected(deliveries: &str, now: &str, skip: [&str; 2], limit: &str) -> String {
        words(&format!(
            "SELECT c.id, c.endpoint_id, c.organization_id FROM ( \
               SELECT d.id, d.endpoint_id, d.organization_id, d.next_attempt_at, \
                 row_number() OVER (PARTITION BY d.organization_id \
                                    ORDER BY d.next_attempt_at, d.id) AS turn \
               FROM {deliveries} \
               WHERE d.next_attempt_at <= {now} \
               AND (d.leased_until IS NULL OR d.leased_until < {now}) \
               AND d.status IN ('pending', 'failed') \
               AND d.endpoint_id IN (SELECT e.id FROM webhook_endpoints AS e WHERE e.is_active) \
               AND d.endpoint_id {} \
               AND d.organization_id {} \
             ) AS c \
             ORDER BY c.turn, c.next_attempt_at, c.id \
             LIMIT {limit}",
            skip[0], skip[1],
        ))
    }

    #[test]
    fn postgres_reads_the_due_deliveries_in_their_turn_binding_arrays() {
        assert_eq!(
            words(&lease_candidates::<crate::pg::Sql>(3, 0)),
            expected(
                "webhook_deliveries AS d",
                "$1",
                ["<> ALL($2)", "<> ALL($3)"],
                "$4"
            )
        );
    }

    #[test]
    fn sqlite_reads_the_lease_index_binding_each_value() {
        let indexed = "webhook_deliveries AS d INDEXED BY webhook_deliveries_lease_idx";
        assert_eq!(
            words(&lease_candidates::<crate::sqlite::Sql>(2, 1)),
            expected(indexed, "?1", ["NOT IN (?2, ?3)", "NOT IN (?4)"], "?5")
        );
        assert_eq!(
            words(&lease_candidates::<crate::sqlite::Sql>(0, 0)),
            expected(indexed, "?1", ["NOT IN ()", "NOT IN ()"], "?2"),
            "nothing left out: empty lists, and the limit second"
        );
    }
}
