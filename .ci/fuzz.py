#!/usr/bin/env python3
"""Fuzzes Gatehouse's HTTP contract with schemathesis, against a built binary (CI: the debug
build, `target/debug/gatehouse`; any build works).

For one backend (SQLite or PostgreSQL) it starts `gatehouse serve` on a fresh database,
registers a user with an Enterprise team (so that every plan-gated route answers for real),
and runs schemathesis from the served `/api/v1/openapi.json`: as that user (Bearer) and as an
API key of the team, each with the organization in `X-Organization-ID`, then on the control
plane (`/control`, tag `control`) as the operator, with `GATEHOUSE_CONTROL_TOKEN`. The operations
that end the caller's own credentials (sign-out, deleting the account) run last, in a run of
their own with a token of their own, so that they cannot cut the others short.

It fails when schemathesis finds a 5xx or an answer that the document does not allow (status,
content type, headers, body), or when the server's log holds a panic. It prints one summary
line per backend: operations, cases, 5xx, schema violations, panics.

    .venv/bin/python .ci/fuzz.py --binary target/debug/gatehouse --backend sqlite --seconds 180
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SECRET_KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
# The operator's token: the control plane (`/control`, tag `control`) is on, and fuzzed with it.
CONTROL_TOKEN = "fuzzing-the-control-plane-0123456789"
PASSWORD = "fuzzing is believing"

# The checks that make a finding: a server error, or an answer the document does not allow.
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)
SERVER_ERROR_CHECKS = {"not_a_server_error"}

# Operations that end the caller's own credentials (sign-out, deleting the account), by
# operationId: fuzzed last, on their own.
SELF_ENDING = ["logout", "delete_me"]


def log(message: str) -> None:
    print(f"fuzz: {message}", flush=True)


class Server:
    """`gatehouse serve` on 127.0.0.1:0; its JSON log lines are kept in a file."""

    def __init__(self, binary: str, env: dict[str, str], workdir: pathlib.Path) -> None:
        self.log_path = workdir / "server.log"
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [binary, "serve"],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.address: str | None = None
        found = threading.Event()

        def read() -> None:
            assert self.process.stderr is not None
            with open(self.log_path, "w", encoding="utf-8") as sink:
                for line in self.process.stderr:
                    sink.write(line)
                    sink.flush()
                    self.lines.append(line)
                    if self.address is None:
                        try:
                            entry = json.loads(line)
                        except ValueError:
                            continue
                        address = entry.get("fields", {}).get("address")
                        if address:
                            self.address = address
                            found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(120) or self.address is None:
            self.stop()
            sys.exit("fuzz: the server did not start:\n" + "".join(self.lines[-40:]))
        self.base = f"http://{self.address}"

    def errors(self) -> list[str]:
        """The server's own lines at ERROR level (actix-web's about unparsable requests left out)."""
        found = []
        for line in self.lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("level") == "ERROR" and str(entry.get("target", "")).startswith("gatehouse"):
                found.append(line.rstrip())
        return found

    def panics(self) -> list[str]:
        return [line.rstrip() for line in self.lines if "panicked" in line]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def call(base: str, method: str, path: str, body=None, headers=None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as error:
        sys.exit(f"fuzz: set-up call {method} {path} failed: {error.code} {error.read()!r}")
    return json.loads(text) if text else {}


def login(base: str, email: str) -> str:
    return call(base, "POST", "/api/v1/auth/login", {"email": email, "password": PASSWORD})[
        "access_token"
    ]


def st_command() -> str:
    """The `st` beside this interpreter (a virtual environment's), else the one on PATH."""
    beside = pathlib.Path(sys.executable).parent / "st"
    return str(beside) if beside.exists() else shutil.which("st") or "st"


def schemathesis(
    base: str,
    headers: dict[str, str],
    seconds: int,
    seed: int,
    report: pathlib.Path,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    tags: list[str] | None = None,
    phases: str | None = None,
) -> dict:
    """One schemathesis run; returns its counts from the NDJSON event stream."""
    command = [
        st_command(),
        "run",
        f"{base}/api/v1/openapi.json",
        "--url",
        base,
        "--checks",
        CHECKS,
        "--seed",
        str(seed),
        "--max-time",
        str(seconds),
        "--workers",
        "2",
        "--request-timeout",
        "30",
        "--generation-database",
        "none",
        # The credentials are ours (the headers below); none are generated.
        "--generation-with-security-parameters",
        "false",
        "--suppress-health-check",
        "all",
        "--continue-on-failure",
        "--no-color",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report),
    ]
    for name, value in headers.items():
        command += ["--header", f"{name}: {value}"]
    for operation in include or []:
        command += ["--include-operation-id", operation]
    for operation in exclude or []:
        command += ["--exclude-operation-id", operation]
    for tag in tags or []:
        command += ["--include-tag", tag]
    if phases:
        command += ["--phases", phases]
    shown = [
        "--header" if c == "--header" else (c.split(":")[0] + ": <redacted>" if prev == "--header" else c)
        for prev, c in zip([""] + command, command)
    ]
    log(" ".join(c if " " not in c else repr(c) for c in shown))
    # In the report's folder: schemathesis keeps a `.schemathesis` folder where it runs. Its
    # own output goes to a file beside the report, and its end to this log when it failed.
    output = report.with_suffix(".log")
    with open(output, "w", encoding="utf-8") as sink:
        outcome = subprocess.run(command, check=False, cwd=report.parent, stdout=sink, stderr=subprocess.STDOUT)
    if outcome.returncode != 0:
        print("".join(output.read_text(encoding="utf-8").splitlines(keepends=True)[-60:]), flush=True)
    return counts(report, outcome.returncode)


# Faults of the fuzzer's own interpreter, not of the server: seen with CPython 3.11, where
# schemathesis's coverage phase (through hypothesis describing a lambda: it parses the source
# file that holds it) builds a Python AST deeper than the interpreter can ("SystemError: AST
# constructor recursion depth mismatch"), for some operations on every seed.
TOOL_FAULTS = {"SystemError", "RecursionError"}
# The phases of a run again after such a fault: all but the coverage phase, where it happens.
PHASES_WITHOUT_COVERAGE = "examples,fuzzing,stateful"


def tool_fault(result: dict) -> bool:
    """A run that failed only because schemathesis itself broke: no check failed, and every
    error it reported is one of `TOOL_FAULTS` (a network error or a timeout is the server's)."""
    return (
        result["returncode"] != 0
        and not result["failures"]
        and bool(result["errors"])
        and all(kind in TOOL_FAULTS for kind, _ in result["errors"])
    )


def fuzz(base: str, headers: dict[str, str], seconds: int, seed: int, report: pathlib.Path, **which) -> dict:
    """One schemathesis run; when schemathesis itself broke (and no check failed), once more
    without the coverage phase. A second break fails the step like any finding."""
    result = schemathesis(base, headers, seconds, seed, report, **which)
    if tool_fault(result):
        log(f"schemathesis itself failed ({result['errors'][0][0]}), not the server: once more, without its coverage phase")
        again = schemathesis(
            base, headers, seconds, seed, report.with_name(f"{report.stem}-again.ndjson"),
            phases=PHASES_WITHOUT_COVERAGE, **which,
        )
        again["retried"] = result["errors"]
        return again
    return result


def describe(case: dict) -> str:
    """The failing request as schemathesis made it: method, path and its parameters (the
    headers are left out: they hold the credentials)."""
    if not case:
        return "?"
    parts = [case.get("method", "?"), case.get("path", "?")]
    for name in ("path_parameters", "query"):
        if case.get(name):
            parts.append(f"{name}={json.dumps(case[name], ensure_ascii=True)[:200]}")
    return " ".join(parts)


def counts(report: pathlib.Path, returncode: int) -> dict:
    """Operations, cases, server errors and document violations, read off the event stream."""
    operations: set[str] = set()
    cases = 0
    failing_cases = 0
    failures: dict[str, set[str]] = {}
    errors: list[str] = []
    if report.exists():
        for line in report.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if "NonFatalError" in event:
                value = event["NonFatalError"].get("value", {})
                errors.append((str(value.get("type", "?")), str(value.get("message", ""))[:300]))
            finished = event.get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished.get("recorder", {})
            label = recorder.get("label", "?")
            interactions = recorder.get("interactions", {})
            if interactions:
                operations.add(label)
            cases += len(interactions)
            cases_by_id = recorder.get("cases", {})
            for case_id, checks in recorder.get("checks", {}).items():
                if any(check.get("status") == "failure" for check in checks):
                    failing_cases += 1
                request = describe(cases_by_id.get(case_id, {}).get("value", {}))
                for check in checks:
                    if check.get("status") != "failure":
                        continue
                    failure = check.get("failure_info", {}).get("failure", {})
                    message = failure.get("message", "").replace("\n", "; ")
                    failures.setdefault(check.get("name", "?"), set()).add(
                        f"{label}: {request}: {failure.get('title', '')}: {message}"
                    )
    return {
        "operations": operations,
        "cases": cases,
        "failing_cases": failing_cases,
        "failures": failures,
        "errors": errors,
        "returncode": returncode,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    parser.add_argument("--seconds", type=int, default=180, help="the whole budget")
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--keep", help="a folder to keep the server log and reports in")
    args = parser.parse_args()
    if not pathlib.Path(st_command()).exists() and shutil.which("st") is None:
        sys.exit(
            "fuzz: schemathesis is needed: scripts/test installs it into .venv "
            "(run this with .venv/bin/python), or pip install -r scripts/test-requirements.txt"
        )

    workdir = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="gatehouse-fuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    holder = None
    if args.backend == "sqlite":
        database_url = f"sqlite://{workdir / 'gatehouse.db'}"
    else:
        # A fresh database, found or started as for the Rust tests; dropped when we go.
        holder = subprocess.Popen(
            ["cargo", "run", "--quiet", "-p", "gatehouse-testkit", "--bin", "gatehouse-test-database"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None
        database_url = holder.stdout.readline().strip()
        if not database_url:
            sys.exit("fuzz: no PostgreSQL database could be had (see gatehouse-testkit's message)")
    # A server configured as one in production is: a public URL whose host is a domain name
    # (here localhost, on a free port picked first), so that security keys (WebAuthn) work.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "GATEHOUSE_BIND": f"127.0.0.1:{port}",
        "GATEHOUSE_PUBLIC_URL": f"http://localhost:{port}",
        "GATEHOUSE_DATABASE_URL": database_url,
        "GATEHOUSE_SECRET_KEY": SECRET_KEY,
        "GATEHOUSE_CONTROL_TOKEN": CONTROL_TOKEN,
        "GATEHOUSE_RATE_LIMITS": "free=1000000,business=1000000,enterprise=1000000",
        "GATEHOUSE_MAIL_DIR": str(workdir / "mail"),
        "GATEHOUSE_LOG_FORMAT": "json",
        "GATEHOUSE_LOG": "info",
    }
    server = Server(args.binary, env, workdir)
    try:
        base = server.base
        email = "fuzz@example.com"
        call(base, "POST", "/api/v1/auth/register", {"email": email, "password": PASSWORD, "full_name": "Fuzz"})
        token = login(base, email)
        bearer = {"Authorization": f"Bearer {token}"}
        team = call(base, "POST", "/api/v1/organizations", {"name": "Fuzz Team"}, bearer)["id"]
        subprocess.run(
            [args.binary, "orgs", "set-plan", team, "enterprise"],
            env=env,
            cwd=workdir,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        key = call(base, "POST", "/api/v1/api-keys", {"name": "fuzz", "organization_id": team}, bearer)["key"]
        # Taken now: the fuzzing before it may lock the account out of signing in.
        last_token = login(base, email)
        organization = {"X-Organization-ID": team}

        budget = max(args.seconds, 40)
        last = max(budget // 10, 10)
        each = (budget - 2 * last) // 2
        results = {
            "bearer": fuzz(
                base, {**bearer, **organization}, each, args.seed, workdir / "bearer.ndjson", exclude=SELF_ENDING
            ),
            "api key": fuzz(
                base,
                {"X-API-Key": key, **organization},
                each,
                args.seed + 1,
                workdir / "api-key.ndjson",
                exclude=SELF_ENDING,
            ),
            # The control plane, as the operator: events, dead letters, replays, the audit.
            "operator": fuzz(
                base,
                {"Authorization": f"Bearer {CONTROL_TOKEN}"},
                last,
                args.seed + 3,
                workdir / "operator.ndjson",
                tags=["control"],
            ),
            "self-ending": fuzz(
                base,
                {"Authorization": f"Bearer {last_token}", **organization},
                last,
                args.seed + 2,
                workdir / "self-ending.ndjson",
                include=SELF_ENDING,
            ),
        }
    finally:
        time.sleep(0.5)
        server.stop()
        if holder is not None and holder.stdin is not None:
            holder.stdin.close()
            holder.wait(60)

    panics = server.panics()
    operations = set().union(*(r["operations"] for r in results.values()))
    cases = sum(r["cases"] for r in results.values())
    server_errors: set[str] = set()
    violations: set[str] = set()
    for result in results.values():
        for check, found in result["failures"].items():
            (server_errors if check in SERVER_ERROR_CHECKS else violations).update(
                f"{check}: {f}" for f in found
            )
    for name, result in results.items():
        if result.get("retried"):
            log(f"{name}: schemathesis broke in its coverage phase the first time: {result['retried'][:3]}")
        if result["errors"]:
            log(f"{name}: schemathesis errors: {result['errors'][:5]}")
    log(
        f"{args.backend}: {len(operations)} operations, {cases} cases, "
        f"{len(server_errors)} 5xx, {len(violations)} schema violations, {len(panics)} panics"
    )
    for line in sorted(server_errors) + sorted(violations) + panics[:20]:
        log(f"  {line}")
    if server_errors:
        # What the server said of its failures: the error and its cause, never a secret.
        for line in server.errors()[:10]:
            log(f"  server: {line[:600]}")
    failed = bool(server_errors or violations or panics) or any(
        r["returncode"] != 0 for r in results.values()
    )
    failing = sum(r["failing_cases"] for r in results.values()) + len(panics)
    if failed and failing == 0:
        failing = 1  # schemathesis itself failed
    # The closing line, in the plain form CI reads: cases that passed every check, and not.
    print(f"fuzz-{args.backend}: {cases - min(failing, cases)} passed, {failing} failed", flush=True)
    if failed:
        log(f"{args.backend}: FAILED (server log and reports in {workdir})")
        return 1
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
