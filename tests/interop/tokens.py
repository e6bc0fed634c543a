"""Token interop with the reference (naas_abi_core.engine.nats_auth).

Reads one JSON request on stdin and writes one JSON answer on stdout:

- {"op": "mint", "secret": s, "now": unix_seconds}: tokens minted by the reference,
  plus its module key for "billing";
- {"op": "verify", "secret": s, "cases": [{"token": t, "audience": a|null}]}: for
  each case {"ok": identity} or {"err": reason};
- {"op": "issue", "identity": i, "key": k, "module": bool, "now": n, "ttl": secs,
  "audience": a|null}: one token issued by the reference, to compare bytes.
"""

import json
import sys
from datetime import UTC, datetime, timedelta

import jwt
from naas_abi_core.engine import nats_auth as auth


def mint(secret: str, now: int) -> dict:
    at = datetime.fromtimestamp(now, UTC)
    key = auth.module_key(secret, "billing")
    return {
        "billing_key": key,
        "service": auth.issue_service_token("api", secret, now=at),
        "service_aud": auth.issue_service_token("engine", secret, now=at, audience="inst-1"),
        "module": auth.issue_module_token("billing", key, now=at),
        "module_aud": auth.issue_module_token("billing", key, now=at, audience="inst-1"),
        "expired": auth.issue_service_token(
            "api", secret, now=at - timedelta(hours=2), ttl=timedelta(hours=1)
        ),
        "wrong_key": auth.issue_service_token("api", "not-the-secret", now=at),
        # No module key exists for "api": a module token asserting it can only be forged.
        "module_api": jwt.encode(
            {"sub": "api", "iat": now, "exp": now + 3600},
            secret,
            algorithm="HS256",
            headers={"kid": auth.MODULE_KEY_ID},
        ),
    }


def verify(secret: str, cases: list) -> list:
    out = []
    for case in cases:
        try:
            out.append({"ok": auth.verify_service_token(case["token"], secret, audience=case["audience"])})
        except auth.InvalidServiceTokenError as exc:
            out.append({"err": str(exc)})
    return out


def issue(req: dict) -> str:
    at = datetime.fromtimestamp(req["now"], UTC)
    ttl = timedelta(seconds=req["ttl"])
    fn = auth.issue_module_token if req["module"] else auth.issue_service_token
    return fn(req["identity"], req["key"], ttl=ttl, now=at, audience=req["audience"])


def main() -> None:
    req = json.load(sys.stdin)
    if req["op"] == "mint":
        answer = mint(req["secret"], req["now"])
    elif req["op"] == "verify":
        answer = verify(req["secret"], req["cases"])
    elif req["op"] == "issue":
        answer = issue(req)
    else:
        raise SystemExit(f"unknown op {req['op']!r}")
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
