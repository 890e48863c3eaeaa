//! The domain's [`DueRule`] (which deliveries are due for an attempt, and the order a lease
//! takes them in) as SQL. The rule is written once, in the domain; the store only translates
//! it, term by term: here into the text of the lease's candidates query (raw SQL on both
//! backends: a window that diesel's DSL does not write) and of PostgreSQL's lease of what was
//! picked, and in `queries::webhooks` into the diesel filter that counts held leases.

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
    /// The deliveries table as the query reads it, aliased `d` (SQLite names its index,
    /// `webhook_deliveries_endpoint_due_idx`).
    const DELIVERIES: &'static str;

    /// Parameter `n`, from 1.
    fn param(n: usize) -> String;

    /// `column` not among `count` values bound from parameter `first` on: the condition, and
    /// how many parameters it takes.
    fn not_among(column: &str, first: usize, count: usize) -> (String, usize);

    /// Each queued endpoint `q`'s first due deliveries as the rows `d` of the query (`d.id`,
    /// `d.endpoint_id`, `d.organization_id`, `d.next_attempt_at`), from the rest of a select of
    /// them, `FROM ... WHERE ... ORDER BY ... LIMIT ...` (correlated with `q.endpoint_id`).
    fn first_due_of_each(rest: &str) -> String;
}

/// The column of the candidates' query that orders by `key`.
const fn column(key: DueKey) -> &'static str {
    match key {
        DueKey::OrganizationTurn => "turn",
        DueKey::NextAttemptAt => "next_attempt_at",
        DueKey::Id => "id",
    }
}

/// The terms of the [`DueRule`] that a delivery's own row decides, for the alias `d` at `now`:
/// the attempt's time come, no lease that holds, a due status.
fn row_terms(now: &str) -> Vec<String> {
    let statuses = DueRule::STATUSES
        .iter()
        .map(|status| format!("'{}'", status.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        format!(
            "d.next_attempt_at {} {now}",
            operator(DueRule::ATTEMPT_TIME)
        ),
        format!(
            "(d.leased_until IS NULL OR d.leased_until {} {now})",
            operator(DueRule::LEASE_EXPIRED)
        ),
        format!("d.status IN ({statuses})"),
    ]
}

/// PostgreSQL's lease of picked deliveries, one statement: of the ids of `$4` (an array), the
/// deliveries still due at `$1` by their rows' own terms of the [`DueRule`] are locked (rows
/// another transaction has locked are skipped, not waited for), given the lease `$2` until
/// `$3`, and returned. (SQLite's write transaction holds every row: it needs no such check.)
pub(crate) fn lease_picked() -> String {
    format!(
        "UPDATE webhook_deliveries SET lease = $2, leased_until = $3 \
         WHERE id IN ( \
           SELECT d.id FROM webhook_deliveries AS d \
           WHERE d.id = ANY($4) AND {due} \
           FOR UPDATE SKIP LOCKED) \
         RETURNING id",
        due = row_terms("$1").join(" AND "),
    )
}

/// The lease's candidates: the deliveries due at parameter 1 (`now`) by the [`DueRule`], but
/// those of `busy` endpoints (bound from parameter 2 on), as `(id, endpoint_id,
/// organization_id)` in the rule's order, at most `per_endpoint` (the parameter after the busy
/// endpoints) of each endpoint and at most the last parameter (the limit) in all. Nothing is
/// locked.
///
/// An endpoint never takes more than `per_endpoint` at a lease, so its first `per_endpoint`
/// due deliveries are all a lease can pick of it: the statement reads only those, and the
/// candidates a lease picks from are those the rule's order would give over every due
/// delivery. The endpoints with deliveries queued (due, or waiting for a retry) are found by
/// skipping through the endpoint index (`webhook_deliveries_endpoint_due_idx`), one probe
/// each (a recursive step); the inactive and the busy are left there, their deliveries never
/// read, however many; each other one's due deliveries are read from the same index in their
/// order, up to `per_endpoint`, and ranked in their organization's turn. A lease costs a probe
/// for each endpoint with deliveries queued and at most `per_endpoint` rows of each, whatever
/// the backlog: the window over every due delivery ranked all of them at every lease (a
/// 10,000-delivery fan-out paid it 10,000 times, `docs/benchmarks.md`).
pub(crate) fn lease_candidates<S: CandidatesSql>(busy: usize) -> String {
    let now = S::param(1);
    let (skip_endpoints, taken) = S::not_among("q.endpoint_id", 2, busy);
    let per_endpoint = S::param(2 + taken);
    let limit = S::param(3 + taken);
    let mut endpoints = vec!["q.endpoint_id IS NOT NULL".to_owned(), skip_endpoints];
    let mut joined = String::new();
    if DueRule::ACTIVE_ENDPOINTS_ONLY {
        joined = " JOIN webhook_endpoints AS e ON e.id = q.endpoint_id".into();
        endpoints.push("e.is_active".into());
    }
    // Within an endpoint, and within an organization: the keys of the rule's order after the
    // organization's turn (a turn is counted in their order).
    let ranks_turns = DueRule::ORDER.contains(&DueKey::OrganizationTurn);
    let after_turn: Vec<String> = DueRule::ORDER
        .iter()
        .skip_while(|key| ranks_turns && **key != DueKey::OrganizationTurn)
        .filter(|key| **key != DueKey::OrganizationTurn)
        .map(|key| format!("d.{}", column(*key)))
        .collect();
    let within = if after_turn.is_empty() {
        "d.id".to_owned()
    } else {
        after_turn.join(", ")
    };
    let turn = if ranks_turns {
        format!(", row_number() OVER (PARTITION BY d.organization_id ORDER BY {within}) AS turn")
    } else {
        String::new()
    };
    let order = DueRule::ORDER
        .iter()
        .map(|key| format!("c.{}", column(*key)))
        .collect::<Vec<_>>()
        .join(", ");
    let queued = "d.next_attempt_at IS NOT NULL";
    let first_due = S::first_due_of_each(&format!(
        "FROM {deliveries} \
         WHERE d.endpoint_id = q.endpoint_id AND {due} \
         ORDER BY {within} \
         LIMIT {per_endpoint}",
        deliveries = S::DELIVERIES,
        due = row_terms(&now).join(" AND "),
    ));
    format!(
        "WITH RECURSIVE queued(endpoint_id) AS ( \
           SELECT (SELECT d.endpoint_id FROM {deliveries} WHERE {queued} \
                   ORDER BY d.endpoint_id LIMIT 1) \
           UNION ALL \
           SELECT (SELECT d.endpoint_id FROM {deliveries} \
                   WHERE {queued} AND d.endpoint_id > q.endpoint_id \
                   ORDER BY d.endpoint_id LIMIT 1) \
           FROM queued AS q WHERE q.endpoint_id IS NOT NULL \
         ) \
         SELECT c.id, c.endpoint_id, c.organization_id FROM ( \
           SELECT d.id, d.endpoint_id, d.organization_id, d.next_attempt_at{turn} \
           FROM queued AS q{joined} {first_due} \
           WHERE {endpoints} \
         ) AS c \
         ORDER BY {order} \
         LIMIT {limit}",
        deliveries = S::DELIVERIES,
        endpoints = endpoints.join(" AND "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statement with its runs of white space made one space.
    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The candidates' statement the rule makes, with what a backend writes its own way: the
    /// deliveries table, how each endpoint's first due deliveries are joined (around their
    /// select's `FROM` onwards), the parameters.
    fn expected(
        deliveries: &str,
        first_due: impl Fn(&str) -> String,
        now: &str,
        skip: &str,
        [per_endpoint, limit]: [&str; 2],
    ) -> String {
        let due = format!(
            "FROM {deliveries} \
             WHERE d.endpoint_id = q.endpoint_id \
             AND d.next_attempt_at <= {now} \
             AND (d.leased_until IS NULL OR d.leased_until < {now}) \
             AND d.status IN ('pending', 'failed') \
             ORDER BY d.next_attempt_at, d.id \
             LIMIT {per_endpoint}"
        );
        words(&format!(
            "WITH RECURSIVE queued(endpoint_id) AS ( \
               SELECT (SELECT d.endpoint_id FROM {deliveries} \
                       WHERE d.next_attempt_at IS NOT NULL \
                       ORDER BY d.endpoint_id LIMIT 1) \
               UNION ALL \
               SELECT (SELECT d.endpoint_id FROM {deliveries} \
                       WHERE d.next_attempt_at IS NOT NULL AND d.endpoint_id > q.endpoint_id \
                       ORDER BY d.endpoint_id LIMIT 1) \
               FROM queued AS q WHERE q.endpoint_id IS NOT NULL \
             ) \
             SELECT c.id, c.endpoint_id, c.organization_id FROM ( \
               SELECT d.id, d.endpoint_id, d.organization_id, d.next_attempt_at, \
                 row_number() OVER (PARTITION BY d.organization_id \
                                    ORDER BY d.next_attempt_at, d.id) AS turn \
               FROM queued AS q JOIN webhook_endpoints AS e ON e.id = q.endpoint_id \
               {} \
               WHERE q.endpoint_id IS NOT NULL AND q.endpoint_id {skip} AND e.is_active \
             ) AS c \
             ORDER BY c.turn, c.next_attempt_at, c.id \
             LIMIT {limit}",
            first_due(&due),
        ))
    }

    #[test]
    fn postgres_reads_each_endpoints_first_due_deliveries_binding_arrays() {
        assert_eq!(
            words(&lease_candidates::<crate::pg::Sql>(3)),
            expected(
                "webhook_deliveries AS d",
                |due| format!(
                    "CROSS JOIN LATERAL (SELECT d.id, d.endpoint_id, d.organization_id, \
                     d.next_attempt_at {due}) AS d"
                ),
                "$1",
                "<> ALL($2)",
                ["$3", "$4"],
            )
        );
    }

    #[test]
    fn sqlite_reads_the_endpoint_index_binding_each_value() {
        let indexed = "webhook_deliveries AS d INDEXED BY webhook_deliveries_endpoint_due_idx";
        let first_due =
            |due: &str| format!("JOIN webhook_deliveries AS d ON d.id IN (SELECT d.id {due})");
        assert_eq!(
            words(&lease_candidates::<crate::sqlite::Sql>(2)),
            expected(
                indexed,
                first_due,
                "+?1",
                "NOT IN (+?2, +?3)",
                ["+?4", "+?5"]
            )
        );
        assert_eq!(
            words(&lease_candidates::<crate::sqlite::Sql>(0)),
            expected(indexed, first_due, "+?1", "NOT IN ()", ["+?2", "+?3"]),
            "nothing left out: an empty list, and the bounds next"
        );
    }
}
