"""The reference's step journal, driven by a script, for the Rust differential test.

    workflow_journal.py < scenario.json

The scenario is a JSON list of operations, run in order on one run id through
naas_abi_sdk.workflows.StepJournal over an in-memory document store:

    {"op": "trigger", "run_id": ..., "fired_at": ...}   a journal for this trigger
    {"op": "start", "key": ..., "kind": "step"|"call", "reuse_running": bool}
    {"op": "retry", "key": ...}
    {"op": "set_child", "key": ..., "child": {...}}
    {"op": "finish", "key": ..., "status": ..., "result": str|null, "error": str}
    {"op": "read", "key": ...}                           the summary read back
    {"op": "result", "key": ...}                         the stored result or null
    {"op": "encode", "key": ..., "value": ...}           encode_result's text or error
    {"op": "check_key", "key": ...}                      "ok" or the refusal's message

Timestamps come from a counter (2026-12-01T00:00:NN+00:00), so both sides
stamp alike. Prints {"puts": [[collection, id, data], ...], "answers": [...]}.
"""

import asyncio
import json
import sys

import naas_abi_sdk.workflows as wf
from naas_abi_sdk.services.errors import DocumentNotFound, VersionConflict


class Doc:
    def __init__(self, data, version):
        self.data, self.version = data, version


class Documents:
    def __init__(self):
        self.docs = {}
        self.puts = []

    async def get(self, collection, doc_id):
        if (collection, doc_id) not in self.docs:
            raise DocumentNotFound("DOCUMENT_NOT_FOUND", doc_id)
        data, version = self.docs[(collection, doc_id)]
        return Doc(dict(data), version)

    async def put(self, collection, doc_id, data, if_version=None):
        _, version = self.docs.get((collection, doc_id), (None, 0))
        if if_version is not None and if_version != version:
            raise VersionConflict("VERSION_CONFLICT", doc_id)
        self.docs[(collection, doc_id)] = (dict(data), version + 1)
        self.puts.append([collection, doc_id, data])


def main():
    ops = json.load(sys.stdin)
    clock = iter(range(10_000))

    def now():
        n = next(clock)
        return f"2026-12-01T00:{n // 60:02d}:{n % 60:02d}+00:00"

    wf._now = now
    documents = Documents()
    answers = []
    journal = None

    async def run():
        nonlocal journal
        for op in ops:
            kind = op["op"]
            if kind == "trigger":
                journal = wf.StepJournal(
                    documents, "default", op["run_id"], op["fired_at"]
                )
            elif kind == "start":
                await journal.start(
                    op["key"], op["kind"], reuse_running=op.get("reuse_running", False)
                )
            elif kind == "retry":
                await journal.retry(op["key"])
            elif kind == "set_child":
                await journal.set_child(op["key"], op["child"])
            elif kind == "finish":
                await journal.finish(
                    op["key"],
                    op["status"],
                    result=op.get("result"),
                    error=op.get("error", ""),
                )
            elif kind == "read":
                answers.append(await journal.read(op["key"]))
            elif kind == "result":
                stored = await journal.result(op["key"])
                answers.append(None if stored is wf.MISSING else stored)
            elif kind == "encode":
                try:
                    answers.append(wf.encode_result(op["key"], op["value"]))
                except Exception as exc:  # the refusal's message is compared
                    answers.append({"error": str(exc)})
            elif kind == "check_key":
                try:
                    wf.check_step_key(op["key"])
                    answers.append("ok")
                except Exception as exc:
                    answers.append({"error": str(exc)})
            else:
                raise ValueError(f"unknown op {kind!r}")

    asyncio.run(run())
    json.dump({"puts": documents.puts, "answers": answers}, sys.stdout)


if __name__ == "__main__":
    main()
