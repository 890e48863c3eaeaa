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

/// The parts both candidates' statements are made of.
struct Terms {
    /// The conditions a candidate meets, but that of its organization.
    due: Vec<String>,
    /// Its organization not among those left out.
    skip_organizations: String,
    /// The limit's parameter.
    limit: String,
    /// The keys of the rule's order after the organization's turn (`d.` columns), which order
    /// the deliveries within an organization; `None` when the rule ranks no turns.
    within: Option<Vec<String>>,
    /// The rule's order over the candidates (`c.` columns).
    order: String,
}

impl Terms {
    /// The terms of the rule at parameter 1 (`now`), leaving out `busy` endpoints and
    /// `busy_organizations` organizations (bound from parameter 2 on, the endpoints first),
    /// with the limit as the last parameter.
    fn of<S: CandidatesSql>(busy: usize, busy_organizations: usize) -> Self {
        let now = S::param(1);
        let (skip_endpoints, taken) = S::not_among("d.endpoint_id", 2, busy);
        let (skip_organizations, taken_too) =
            S::not_among("d.organization_id", 2 + taken, busy_organizations);
        let mut due = row_terms(&now);
        if DueRule::ACTIVE_ENDPOINTS_ONLY {
            due.push(
                "d.endpoint_id IN (SELECT e.id FROM webhook_endpoints AS e WHERE e.is_active)"
                    .into(),
            );
        }
        due.push(skip_endpoints);
        // A turn is counted in the order of the keys after it.
        let within = DueRule::ORDER
            .iter()
            .position(|key| *key == DueKey::OrganizationTurn)
            .map(|at| {
                DueRule::ORDER[at + 1..]
                    .iter()
                    .map(|key| format!("d.{}", column(*key)))
                    .collect()
            });
        let order = DueRule::ORDER
            .iter()
            .map(|key| format!("c.{}", column(*key)))
            .collect::<Vec<_>>()
            .join(", ");
        Self {
            due,
            skip_organizations,
            limit: S::param(2 + taken + taken_too),
            within,
            order,
        }
    }
}

/// The lease's candidates: the deliveries due at parameter 1 (`now`) by the [`DueRule`], but
/// those of `busy` endpoints and of `busy_organizations` organizations (bound from parameter
/// 2 on, the endpoints first), as `(id, endpoint_id, organization_id)` in the rule's order, at
/// most the last parameter (the limit). Nothing is locked.
pub(crate) fn lease_candidates<S: CandidatesSql>(busy: usize, busy_organizations: usize) -> String {
    let Terms {
        mut due,
        skip_organizations,
        limit,
        within,
        order,
    } = Terms::of::<S>(busy, busy_organizations);
    due.push(skip_organizations);
    let turn = within
        .map(|within| {
            let within = if within.is_empty() {
                String::new()
            } else {
                format!(" ORDER BY {}", within.join(", "))
            };
            format!(", row_number() OVER (PARTITION BY d.organization_id{within}) AS turn")
        })
        .unwrap_or_default();
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

/// The same candidates as [`lease_candidates`], the same rows in the same order and with the
/// same parameters, written for PostgreSQL so that a lease does not read every due delivery:
/// the first `limit` in the rule's order are among each organization's first `limit` due
/// deliveries, so it reads only those. The organizations with deliveries queued are found by
/// skipping through the organization index (`webhook_deliveries_organization_due_idx`), one
/// probe each (a recursive step); each one's due deliveries are read from the same index in
/// their order up to the limit (`LATERAL`), and ranked in their turn. The window over every due
/// delivery ranked all of them at every lease: 16 ms with 10,000 due, against 0.6 ms
/// (`docs/benchmarks.md`). A lease now costs a probe or two for each organization with
/// deliveries queued (due or waiting for a retry) and the index entries it reads past: those
/// in flight, those of the endpoints left out, and those of deliveries made since the last
/// vacuum. Falls back to [`lease_candidates`] should the rule not rank by organization turns.
pub(crate) fn lease_candidates_per_organization<S: CandidatesSql>(
    busy: usize,
    busy_organizations: usize,
) -> String {
    let Terms {
        due,
        skip_organizations,
        limit,
        within,
        order,
    } = Terms::of::<S>(busy, busy_organizations);
    let Some(within) = within else {
        return lease_candidates::<S>(busy, busy_organizations);
    };
    let within = if within.is_empty() {
        "d.organization_id".to_owned()
    } else {
        within.join(", ")
    };
    let queued = "d.next_attempt_at IS NOT NULL";
    format!(
        "WITH RECURSIVE queued(organization_id) AS ( \
           (SELECT d.organization_id FROM {deliveries} \
            WHERE {queued} AND {skip_organizations} \
            ORDER BY d.organization_id LIMIT 1) \
           UNION ALL \
           SELECT (SELECT d.organization_id FROM {deliveries} \
                   WHERE {queued} AND {skip_organizations} \
                   AND d.organization_id > q.organization_id \
                   ORDER BY d.organization_id LIMIT 1) \
           FROM queued AS q WHERE q.organization_id IS NOT NULL \
         ) \
         SELECT c.id, c.endpoint_id, c.organization_id \
         FROM queued AS q CROSS JOIN LATERAL ( \
           SELECT d.id, d.endpoint_id, d.organization_id, d.next_attempt_at, \
             row_number() OVER (ORDER BY {within}) AS turn \
           FROM {deliveries} \
           WHERE d.organization_id = q.organization_id AND {due} \
           ORDER BY {within} \
           LIMIT {limit} \
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
    fn postgres_reads_each_organizations_first_due_deliveries_in_their_turn() {
        let due = "d.next_attempt_at <= $1 \
             AND (d.leased_until IS NULL OR d.leased_until < $1) \
             AND d.status IN ('pending', 'failed') \
             AND d.endpoint_id IN (SELECT e.id FROM webhook_endpoints AS e WHERE e.is_active) \
             AND d.endpoint_id <> ALL($2)";
        let queued = "d.next_attempt_at IS NOT NULL AND d.organization_id <> ALL($3)";
        assert_eq!(
            words(&lease_candidates_per_organization::<crate::pg::Sql>(3, 0)),
            words(&format!(
                "WITH RECURSIVE queued(organization_id) AS ( \
                   (SELECT d.organization_id FROM webhook_deliveries AS d \
                    WHERE {queued} ORDER BY d.organization_id LIMIT 1) \
                   UNION ALL \
                   SELECT (SELECT d.organization_id FROM webhook_deliveries AS d \
                           WHERE {queued} AND d.organization_id > q.organization_id \
                           ORDER BY d.organization_id LIMIT 1) \
                   FROM queued AS q WHERE q.organization_id IS NOT NULL \
                 ) \
                 SELECT c.id, c.endpoint_id, c.organization_id \
                 FROM queued AS q CROSS JOIN LATERAL ( \
                   SELECT d.id, d.endpoint_id, d.organization_id, d.next_attempt_at, \
                     row_number() OVER (ORDER BY d.next_attempt_at, d.id) AS turn \
                   FROM webhook_deliveries AS d \
                   WHERE d.organization_id = q.organization_id AND {due} \
                   ORDER BY d.next_attempt_at, d.id \
                   LIMIT $4 \
                 ) AS c \
                 ORDER BY c.turn, c.next_attempt_at, c.id \
                 LIMIT $4"
            ))
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
