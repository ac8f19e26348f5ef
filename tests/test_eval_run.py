"""hermes-core eval: exact scores for a scripted provider, failures that do not stop the run, the
clock during ingest, and --answer against the loopback Messages API with the real anthropic SDK."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hermes_core import MemoryProvider, Tool, hookimpl
from hermes_core.plugins.eval.datasets import parse_dataset
from hermes_core.plugins.eval.judge import LONGMEMEVAL_JUDGE
from hermes_core.plugins.eval.report import build_report
from hermes_core.plugins.eval.run import EvalOptions, run_eval
from hermes_core.plugins.eval.stack import StackSpec
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.testing import MessagesAPIServer

BIKE = "I keep my bicycle locked in the shed behind the blue house on Elm Street"
PIANO = "My daughter started piano lessons with a teacher called Mrs Okafor on Mondays"
GARDEN = "We planted three apple trees and a row of raspberries along the south fence"


def session(text: str, answer: bool = True) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text, **({"has_answer": True} if answer else {})},
            {"role": "assistant", "content": "Noted, thanks for telling me."}]


def question(qid: str, text: str, evidence: list[str], qtype: str = "single-session-user") -> dict:
    return {
        "question_id": qid, "question_type": qtype, "question": text, "answer": "x",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": ["bike", "piano", "garden"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 09:00", "2023/05/03 (Wed) 09:00"],
        "haystack_sessions": [session(BIKE, "bike" in evidence), session(PIANO, "piano" in evidence),
                              session(GARDEN, "garden" in evidence)],
        "answer_session_ids": evidence,
    }


#: the hand-written file: three questions with known evidence
DATASET = [
    question("where-bike", "Where is my bicycle?", ["bike"]),
    question("piano-day", "When are the piano lessons?", ["piano"]),
    question("home-both", "What did I say about the shed and the garden?", ["bike", "garden"],
             "multi-session"),
]
#: what the scripted provider returns per question, best first (one line = one item)
SCRIPT = {
    "Where is my bicycle?": [BIKE, PIANO, GARDEN],  # evidence first: R@1 = 1, R@3 = 1
    "When are the piano lessons?": [BIKE, GARDEN, PIANO],  # evidence third: R@1 = 0, R@3 = 1
    "What did I say about the shed and the garden?": [GARDEN, PIANO, "unrelated words"],  # 1 of 2
}


class Scripted(MemoryProvider):
    """Retrieval by script: prefetch returns the lines above for each question."""

    name = "scripted"

    @hookimpl
    def prefetch(self, query: str) -> str | None:
        return "\n".join(SCRIPT.get(query, []))


def spec_for(*providers: type[MemoryProvider], config: dict[str, Any] | None = None) -> StackSpec:
    class Registrar:
        @hookimpl
        def register_memory_providers(self, register: Any) -> None:
            for cls in providers:
                register(cls)

    return StackSpec(None, providers=[p.name for p in providers], plugins=[("eval-test", Registrar())],
                     entry_points=False, directories=False)


def run(data: list[dict], spec: StackSpec, **options: Any) -> dict[str, Any]:
    dataset = parse_dataset(data)
    opts = EvalOptions(ks=(1, 3), **options)
    result = run_eval(dataset, spec, opts)
    return build_report(result, dataset="t.json", fmt=dataset.format, providers=[], engine=None,
                        ks=(1, 3), answered=opts.llm is not None)


def test_scripted_provider_gives_exact_recall_at_1_and_3(tmp_path: Path):
    report = run(DATASET, spec_for(Scripted), scratch_root=tmp_path)
    q = {r["id"]: r for r in report["questions"]}
    assert all(r["ok"] for r in q.values())
    assert (q["where-bike"]["scores"]["recall@1"], q["where-bike"]["scores"]["recall@3"]) == (1.0, 1.0)
    assert (q["piano-day"]["scores"]["recall@1"], q["piano-day"]["scores"]["recall@3"]) == (0.0, 1.0)
    assert (q["home-both"]["scores"]["recall@1"], q["home-both"]["scores"]["recall@3"]) == (0.5, 0.5)
    assert q["home-both"]["scores"]["hit@3"] == 1.0 and q["piano-day"]["scores"]["hit@1"] == 0.0
    # NDCG@3 of "evidence at rank 3 of 1": 1 / log2(4)
    assert q["piano-day"]["scores"]["ndcg@3"] == pytest.approx(0.5)
    assert q["piano-day"]["scores"]["found_at"] == {"piano": 3}
    overall = report["summary"]["overall"]
    assert overall["recall@1"] == pytest.approx(0.5)
    assert overall["recall@3"] == pytest.approx(0.8333, abs=1e-4)
    assert report["summary"]["single-session-user"]["recall@1"] == 0.5
    assert report["summary"]["multi-session"]["recall@3"] == 0.5
    (source,) = q["piano-day"]["sources"]
    assert source["source"] == "prefetch:scripted" and [i["covers"] for i in source["items"]] == [
        [], [], ["piano"]]
    assert not list(tmp_path.iterdir())  # scratch homes are removed
    json.dumps(report)


class IdSearch(MemoryProvider):
    """A search tool that answers with the kernel's session ids only (no evidence text)."""

    name = "idsearch"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sessions: dict[str, str] = {}  # dataset session -> kernel session id

    @hookimpl
    def on_message(self, session: Any) -> None:
        self.sessions[session.attributes["eval_session"]] = session.id

    @hookimpl
    def get_tools(self) -> list[Tool]:
        def search(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
            order = ["garden", "piano", "bike"] if "bicycle" in args["query"] else ["piano"]
            return {"results": [{"session_id": self.sessions[s], "note": "no text"} for s in order]}

        return [Tool(name="id_search", description="search", handler=search,
                     parameters={"type": "object", "properties": {"query": {"type": "string"}},
                                 "required": ["query"]})]


def test_items_with_session_ids_match_by_id():
    report = run(DATASET[:2], spec_for(IdSearch))
    q = {r["id"]: r for r in report["questions"]}
    (src,) = q["where-bike"]["sources"]
    assert src["source"] == "tool:id_search"
    assert [i["dataset_session"] for i in src["items"]] == ["garden", "piano", "bike"]
    assert (q["where-bike"]["scores"]["recall@1"], q["where-bike"]["scores"]["recall@3"]) == (0.0, 1.0)
    assert q["piano-day"]["scores"]["recall@1"] == 1.0
    # matched by id, not by text: no item holds any evidence words
    assert all(i["text"].endswith("\nno text") and "bicycle" not in i["text"] for i in src["items"])


def test_ingest_dates_reach_the_provider(tmp_path: Path):
    seen: dict[str, float] = {}
    started: dict[str, float] = {}

    class Dates(MemoryProvider):
        name = "dates"

        @hookimpl
        def on_message(self, message: Any, session: Any) -> None:
            seen.setdefault(session.attributes["eval_session"], message.timestamp)
            started.setdefault(session.attributes["eval_session"], session.started_at)

    report = run(DATASET[:1], spec_for(Dates))
    assert report["questions"][0]["ok"] and report["questions"][0]["scores"]["recall@3"] == 0.0
    days = {"bike": "2023-05-01", "piano": "2023-05-02", "garden": "2023-05-03"}
    assert {k: datetime.fromtimestamp(v, UTC).date().isoformat() for k, v in seen.items()} == days
    assert {k: datetime.fromtimestamp(v, UTC).date().isoformat() for k, v in started.items()} == days


def test_bad_question_raising_and_hanging_providers_fail_questions_not_the_run():
    release = threading.Event()

    class Breaks(MemoryProvider):
        name = "breaks"

        @hookimpl
        def sync_turn(self, session: Any) -> None:
            if session.attributes.get("eval_session") == "garden":
                raise OSError("disk full")

    class Hangs(MemoryProvider):
        name = "hangs"

        @hookimpl
        def prefetch(self, query: str) -> str:
            if "piano" in query:
                release.wait(30)
            return BIKE

    unknown = question("odd", "Where is my bicycle?", ["bike"], "single-hop")
    ticks: list[str] = []
    try:
        report = run([DATASET[0], unknown, DATASET[1]], spec_for(Hangs), deadline=0.3,
                     on_question=lambda r: ticks.append(r["id"]))
        broken = run(DATASET[:1], spec_for(Breaks))
    finally:
        release.set()
    q = {r["id"]: r for r in report["questions"]}
    assert q["where-bike"]["ok"] and q["where-bike"]["scores"]["recall@1"] == 1.0
    assert not q["odd"]["ok"] and "question_type: unknown type 'single-hop'" in q["odd"]["failure"]
    assert not q["piano-day"]["ok"]
    assert q["piano-day"]["failure"] == "retrieval: prefetch:hangs stale: no answer within 0.3 s"
    overall = report["summary"]["overall"]
    assert (overall["questions"], overall["failed"], overall["scored"]) == (3, 2, 1)
    assert overall["recall@1"] == 1.0  # failures are counted apart, not averaged in as zeros
    assert [f["id"] for f in report["failures"]] == ["odd", "piano-day"]
    assert ticks == ["where-bike", "odd", "piano-day"]  # progress: each question once, as it ends
    (b,) = broken["questions"]
    assert not b["ok"] and b["failure"].startswith("ingest: ") and "disk full" in b["failure"]


def test_answer_and_judge_through_the_real_sdk():
    def model(body: dict[str, Any]) -> str:
        prompt = text_of(body)
        if prompt.startswith("I will give you a question"):  # the LongMemEval judge
            asked, response = prompt.split("Model Response: ", 1)
            return "yes" if "bicycle" in asked and "Elm Street" in response else "no"
        if "Elm Street" in prompt.split("Question:")[0]:
            return "In the shed behind the blue house on Elm Street."
        return "I do not know."

    with MessagesAPIServer(model) as api:
        llm = AnthropicLLM(api_key="test-key", base_url=api.base_url, model="claude-test", max_retries=0)
        report = run(DATASET[:2], spec_for(Scripted), llm=llm)
        bodies = api.bodies
    q = {r["id"]: r for r in report["questions"]}
    assert q["where-bike"]["answer_run"]["correct"] is True
    assert q["where-bike"]["answer_run"]["hypothesis"].endswith("Elm Street.")
    # piano-day: the recall ranks BIKE first, the fake model answers from it, the judge says no
    assert q["piano-day"]["answer_run"]["correct"] is False
    assert report["summary"]["overall"]["accuracy"] == 0.5
    texts = [text_of(b) for b in bodies]
    judge_prompts = [t for t in texts if t.startswith("I will give you a question")]
    assert len(judge_prompts) == 2 and len(texts) == 4
    expected = LONGMEMEVAL_JUDGE["single-session-user"].format("Where is my bicycle?", "x",
                                                              q["where-bike"]["answer_run"]["hypothesis"])
    assert judge_prompts[0] == expected  # the benchmark's template, byte for byte


def text_of(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def test_providers_background_work_is_settled_before_the_questions():
    class Deferred(MemoryProvider):
        """Stores turns on its own thread; answers only from what has landed."""

        name = "deferred"

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.stored: list[str] = []
            self.pending: list[threading.Thread] = []

        @hookimpl
        def sync_turn(self, user_message: Any) -> None:
            gate = threading.Event()

            def land() -> None:
                gate.wait(30)  # released by settle(): nothing lands before it is called
                self.stored.append(user_message.content)

            thread = threading.Thread(target=land, daemon=True)
            thread.start()
            self.pending.append(thread)
            self.gates = [*getattr(self, "gates", []), gate]

        def settle(self, timeout: float) -> bool:
            for gate in getattr(self, "gates", []):
                gate.set()
            for thread in self.pending:
                thread.join(timeout)
            return all(not t.is_alive() for t in self.pending)

        @hookimpl
        def prefetch(self, query: str) -> str:
            return "\n".join(self.stored)

    class NeverSettles(MemoryProvider):
        name = "never"

        def settle(self, timeout: float) -> bool:
            return False

    report = run(DATASET[:1], spec_for(Deferred))
    (q,) = report["questions"]
    assert q["ok"] and q["scores"]["recall@3"] == 1.0  # all three turns had landed
    assert len(q["sources"][0]["items"]) == 3
    late = run(DATASET[:1], spec_for(NeverSettles), settle_timeout=0.5)
    (q,) = late["questions"]
    assert q["failure"] == "ingest: provider never: its own background work did not finish within 0.5 s"


def test_abstention_questions_get_no_retrieval_scores():
    abstain = question("where-bike_abs", "Where is my canoe?", ["bike"])
    report = run([DATASET[0], abstain], spec_for(Scripted))
    q = {r["id"]: r for r in report["questions"]}
    assert q["where-bike_abs"]["ok"] and q["where-bike_abs"]["scores"] is None
    overall = report["summary"]["overall"]
    assert (overall["scored"], overall["no_evidence"], overall["recall@1"]) == (1, 1, 1.0)


def test_locomo_conversation_through_the_session_archive():
    conversation = {
        "sample_id": "conv-9",
        "conversation": {
            "speaker_a": "Caroline", "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1",
                 "text": "I joined a pottery class at the community centre."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Lovely! What are you making first?"},
                {"speaker": "Caroline", "dia_id": "D1:3", "text": "A blue glazed teapot for my grandmother."},
            ],
            "session_2_date_time": "7:55 pm on 9 June, 2023",
            "session_2": [
                {"speaker": "Melanie", "dia_id": "D2:1",
                 "text": "We drove to the coast and watched the surfers."},
                {"speaker": "Caroline", "dia_id": "D2:2",
                 "text": "The coast sounds relaxing after a long week."},
            ],
        },
        "qa": [
            {"question": "What is Caroline making in her pottery class?", "answer": "A teapot",
             "evidence": ["D1:3"], "category": 4},
            {"question": "Where did Melanie drive to watch the surfers?", "answer": "The coast",
             "evidence": ["D2:1"], "category": 4},
        ],
    }
    spec = StackSpec(None, providers=["session_archive"], entry_points=False, directories=False)
    report = run([conversation], spec)
    q = {r["id"]: r for r in report["questions"]}
    assert set(q) == {"conv-9/q1", "conv-9/q2"} and all(r["ok"] for r in q.values())
    assert report["summary"]["single-hop"]["questions"] == 2
    # one ingest for the conversation; the archive's session search names the session holding the
    # evidence turn (speaker_b's lines are the replies, and are stored too)
    assert q["conv-9/q2"]["ingest"] == q["conv-9/q1"]["ingest"]
    assert q["conv-9/q1"]["scores"]["recall@1"] == 1.0 and q["conv-9/q2"]["scores"]["recall@1"] == 1.0
    # the archive's prefetch is off by default: an empty source beside the tool
    by_name = {s["source"]: s for s in q["conv-9/q2"]["sources"]}
    assert set(by_name) == {"prefetch:session_archive", "tool:session_search"}
    assert by_name["prefetch:session_archive"]["items"] == []
    src = by_name["tool:session_search"]
    assert src["items"][0]["dataset_session"] == "session_2"
    # per source, an empty answer is counted apart from the answers (it is not a miss)
    assert report["sources"]["prefetch:session_archive"]["answers"] == 0
    assert report["sources"]["prefetch:session_archive"]["empty"] == 2
    assert report["sources"]["tool:session_search"]["answers"] == 2


def test_providers_hanging_during_ingest_fail_their_questions():
    release = threading.Event()

    class SlowSync(MemoryProvider):
        name = "slowsync"

        @hookimpl
        def sync_turn(self) -> None:
            release.wait(30)  # on the kernel's worker: the settle after each turn times out

    class StuckArchive(MemoryProvider):
        name = "stuck"

        @hookimpl
        def on_message(self, session: Any) -> None:
            if session.attributes.get("eval_session") == "piano":
                release.wait(30)  # on the turn's own thread: only the case timeout ends it

    def spec(cls: type[MemoryProvider]) -> StackSpec:
        s = spec_for(cls)
        s.settings = [("memory.worker_drain_timeout", "0.3")]
        return s

    try:
        slow = run(DATASET[:1], spec(SlowSync))
        stuck_ticks: list[dict[str, Any]] = []
        stuck = run(DATASET[:1], spec(StuckArchive), case_timeout=2, on_question=stuck_ticks.append)
    finally:
        release.set()
    (q,) = slow["questions"]
    assert q["failure"] == ("ingest: the background work (sync_turn, ...) did not settle within 0.3 s "
                            "(a provider hung?)")
    (q,) = stuck["questions"]
    assert q["failure"] == "timeout: the case did not finish within 2 s (a provider hung?)"
    assert stuck["summary"]["overall"]["failed"] == 1
    assert [t["failure"] for t in stuck_ticks] == [q["failure"]]
