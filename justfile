# Gatehouse developer recipes. `just --list` shows them.

# Serve on the embedded SQLite default (gatehouse.db in this folder); installs the system
# libraries the build links against first.
run *args:
    scripts/serve {{args}}

# Everything CI runs: fmt check, clippy, the domain purity check, all tests.
ci:
    bash .ci/run

# Every test; installs what they need first (PostgreSQL, Redis, .venv, Chromium).
test *args:
    scripts/test {{args}}

fmt:
    cargo fmt --all

lint:
    cargo clippy --workspace --all-targets -- -D warnings

# Licences and advisories (needs `cargo install cargo-deny`).
deny:
    cargo deny check

# Benchmarks against their physical limits (needs wrk): `just bench`, `just bench --backend sqlite`.
bench *args:
    cargo bench -p gatehouse-server --bench load -- {{args}}

# What one abusive client costs everyone else (issue 30's findings as figures), against the
# release binary: `just bench-abuse`, `just bench-abuse --backend sqlite --seconds 30`.
bench-abuse *args:
    cargo bench -p gatehouse-server --bench abuse -- {{args}}

# Three replicas behind nginx against one, on PostgreSQL (issue 34): reads, webhook fan-out and
# cross-replica wake-ups, against the release binary (needs wrk and nginx): `just bench-cluster`,
# `just bench-cluster --seconds 30 --changes 1000`.
bench-cluster *args:
    cargo bench -p gatehouse-server --bench cluster -- {{args}}

# What one tenant's heavy use of its own data costs the others (issue 50): a search over 100,000
# members, SCIM filters over 50,001 users, a purge of 800,000 expired rows, a 100,000-delivery
# backlog, each beside a victim tenant, against the release binary: `just bench-tenants`,
# `just bench-tenants --backend sqlite --only search,purge --members 10000`.
bench-tenants *args:
    cargo bench -p gatehouse-server --bench tenants -- {{args}}

# A filtered page of the audit log at a million records, on SQLite and PostgreSQL:
# `just bench-audit`, `just bench-audit --backend sqlite --records 100000`, `--try-indexes`.
bench-audit *args:
    cargo bench -p gatehouse-store --bench audit_page -- {{args}}

# The deepest page of 100,000 members and audit records, on SQLite and PostgreSQL:
# `just bench-listings`, `just bench-listings --backend sqlite --runs 50`,
# `--without-listing-indexes` (the figures before migration 31).
bench-listings *args:
    cargo bench -p gatehouse-store --bench listing_page -- {{args}}

# The example product service (examples/product-service) on http://127.0.0.1:8090, trusting the
# Gatehouse of `just run`: `WEBHOOK_SECRET=whsec_... just example` (GATEHOUSE_URL, PORT to change).
example:
    cargo run -p gatehouse-example-product

# What verifying a token costs a product: `Verifier::verify` on a cached key set beside a bare
# `jsonwebtoken::decode` (`just bench-verify 50000` for more rounds).
bench-verify *args:
    cargo bench -p gatehouse-verify --bench verify -- {{args}}

# Print the OpenAPI document.
openapi:
    cargo run --quiet -- openapi
