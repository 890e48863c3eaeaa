"""SCIM 2.0 conformance run: scim2-tester against a live SCIM server.

    run.py BASE_URL TOKEN      e.g. run.py http://127.0.0.1:8080/scim/v2/<org-uuid> ghsc_...

Runs every check of scim2-tester (RFC 7643/7644: discovery endpoints, then create, read,
attribute selection, replace, delete and PATCH add/remove/replace for each announced
resource type), sending `Authorization: Bearer TOKEN`. The server tests run it with the
project's .venv python (scripts/test installs scim2-tester from scripts/test-requirements.txt).

Prints one line per check that did not pass, then ONE JSON object on the last line:
  {"total", "passed", "failed", "skipped", "by_status", "failures": [{"status", "title",
   "resource_type", "description", "reason", "data"}]}
Exit code 0 when nothing failed, 1 otherwise. SUCCESS, COMPLIANT and ACCEPTABLE pass,
SKIPPED is skipped (PATCH not announced, no attribute to test, ...), and any other status
(ERROR, CRITICAL, DEVIATION) fails. With SCIM_TRACE=FILE, every exchange is appended to
FILE as JSON lines, for debugging.
"""

import json
import os
import sys

import httpx2
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

PASSING = {Status.SUCCESS, Status.COMPLIANT, Status.ACCEPTABLE}


def short(data, limit=400):
    """A debugging hint a line long: the JSON of a model, the body of a response."""
    if data is None:
        return None
    if hasattr(data, "status_code") and hasattr(data, "text"):
        text = f"HTTP {data.status_code} {data.text}"
    elif hasattr(data, "model_dump"):
        text = json.dumps(data.model_dump(mode="json", exclude_none=True))
    else:
        try:
            text = json.dumps(data, default=str)
        except (TypeError, ValueError):
            text = repr(data)
    return text if len(text) <= limit else text[:limit] + "..."


def tracer(path):
    """httpx2 response hook that appends each request and its answer to a file."""

    def trace(response):
        response.read()
        request = response.request
        body = request.content.decode(errors="replace")
        with open(path, "a") as out:
            out.write(json.dumps({
                "method": request.method,
                "url": str(request.url),
                "request": json.loads(body) if body.startswith("{") else body or None,
                "status": response.status_code,
                "content_type": response.headers.get("content-type"),
                "response": response.text,
            }) + "\n")

    return trace


def main(base_url, token):
    hooks = {"response": [tracer(os.environ["SCIM_TRACE"])]} if os.environ.get("SCIM_TRACE") else {}
    http = httpx2.Client(
        base_url=base_url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        event_hooks=hooks,
    )
    results = check_server(SyncSCIMClient(http))

    by_status, failures = {}, []
    for r in results:
        by_status[r.status.name] = by_status.get(r.status.name, 0) + 1
        if r.status in PASSING or r.status == Status.SKIPPED:
            continue
        failure = {
            "status": r.status.name,
            "title": r.title,
            "resource_type": r.resource_type,
            "description": (r.description or "").strip().split("\n")[0],
            "reason": r.reason,
        }
        if r.data is not None:
            failure["data"] = short(r.data)
        failures.append(failure)
        where = f" [{r.resource_type}]" if r.resource_type else ""
        print(f"{r.status.name} {r.title}{where}: {' '.join(str(r.reason).split())}", file=sys.stderr)

    skipped = by_status.get("SKIPPED", 0)
    summary = {
        "total": len(results),
        "passed": len(results) - skipped - len(failures),
        "failed": len(failures),
        "skipped": skipped,
        "by_status": by_status,
        "failures": failures,
    }
    print(json.dumps(summary))
    return 0 if not failures else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
