"""The LLM annotator against a real OpenAI-compatible server (`transformers serve`) on
127.0.0.1, serving a small model trained here to answer the annotation prompt."""

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch

from dfsu.config import load_config
from dfsu.pii.llm import (
    LLMAnnotator,
    ServerBackend,
    build_prompt,
    locate,
    parse_entities,
)
from dfsu.simulation.stages.target import build_model, train_tokenizer
from dfsu.stages.synthesis import annotate

KNOWN = {
    "Login from 10.1.2.3 by zoe_k.": [
        {"value": "10.1.2.3", "label": "IPV4"},
        {"value": "zoe_k", "label": "USERNAME"},
    ],
    "Mail ann@example.org now.": [
        {"value": "ann@example.org", "label": "EMAIL"},
        {"value": "bob@nowhere.net", "label": "EMAIL"},
    ],
}


def test_parse_and_locate():
    assert parse_entities('junk [{"value": "x", "label": "givenname"}] more') == [
        {"value": "x", "label": "FIRSTNAME"}
    ]
    assert parse_entities("[1, 2]") is None and parse_entities("no list") is None
    assert parse_entities("[]") == []
    spans, dropped = locate(
        "a 1.2.3.4 b 1.2.3.4",
        [{"value": "1.2.3.4", "label": "IPV4"}, {"value": "9.9.9.9", "label": "IPV4"}],
    )
    assert [(s.start, s.end) for s in spans] == [(2, 9), (12, 19)] and dropped == 1
    assert build_prompt("T", shots=1).count("Text:") == 2


def _train_answering_model(directory: Path) -> None:
    """A tiny GPT-NeoX that has memorized the answers to the zero-shot prompts in KNOWN."""
    texts = [build_prompt(t, shots=0) + " " + json.dumps(a) for t, a in KNOWN.items()]
    tok = train_tokenizer(texts * 5, vocab_size=400)
    cfg = load_config(
        "tiny",
        [
            "target.hidden_size=64",
            "target.num_layers=2",
            "target.num_heads=2",
            "target.intermediate_size=128",
        ],
    )
    model = build_model(cfg.target, len(tok), tok.eos_token_id, tok.pad_token_id)
    ids = [tok(t)["input_ids"] + [tok.eos_token_id] for t in texts]
    width = max(map(len, ids))
    batch = torch.full((len(ids), width), tok.pad_token_id)
    for i, x in enumerate(ids):
        batch[i, : len(x)] = torch.tensor(x)
    labels = batch.masked_fill(batch == tok.pad_token_id, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    torch.manual_seed(0)
    for _ in range(300):
        loss = model(input_ids=batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if loss.item() < 0.01:
            break
    model.save_pretrained(directory)
    tok.save_pretrained(directory)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("annotator-model")
    _train_answering_model(model_dir)
    port = _free_port()
    exe = Path(sys.executable).parent / "transformers"
    proc = subprocess.Popen(
        # No model forced: the server loads each requested local directory on demand.
        [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"HF_HUB_OFFLINE": "1", "PATH": str(exe.parent)},
    )
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("transformers serve did not come up")
        yield f"http://127.0.0.1:{port}/v1", str(model_dir)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_annotator_reads_a_real_servers_answer_and_falls_back_on_garbage(server, trained_micro_run):
    base_url, model = server
    annotator = LLMAnnotator(ServerBackend(base_url, model, max_tokens=80), shots=0)
    spans, who, reason = annotator("Login from 10.1.2.3 by zoe_k.")
    assert who == "llm" and reason is None
    assert [(s.value, s.label, s.start) for s in spans] == [
        ("10.1.2.3", "IPV4", 11),
        ("zoe_k", "USERNAME", 23),
    ]
    spans, who, _ = annotator("Mail ann@example.org now.")
    assert who == "llm" and [s.value for s in spans] == ["ann@example.org"]
    assert annotator.counts == {"llm": 2, "fallback": 0, "dropped_values": 1}  # bob@... absent
    # A model that never learned the task answers with corpus text, not JSON: the text is
    # annotated by the pattern detectors instead, and the reason is kept.
    _, micro = trained_micro_run
    garbage = LLMAnnotator(ServerBackend(base_url, str(micro / "target"), max_tokens=30), shots=0)
    spans, who, reason = garbage("Call 555-0100 about card 4539578763621486 today.")
    assert who == "pattern-fallback" and "not a JSON list" in reason
    assert [s.label for s in spans] == ["PHONENUMBER", "CREDITCARDNUMBER"]
    assert garbage.counts == {"llm": 0, "fallback": 1, "dropped_values": 0}


def test_unreachable_server_falls_back_after_retries():
    backend = ServerBackend(f"http://127.0.0.1:{_free_port()}/v1", "m", timeout=1, retries=1)
    annotator = LLMAnnotator(backend, shots=0)
    spans, who, reason = annotator("from 10.0.0.1")
    assert who == "pattern-fallback" and reason.startswith("request failed")
    assert [s.value for s in spans] == ["10.0.0.1"]


def test_a_server_that_never_answers_times_out(monkeypatch):
    """The client's timeout and retries bound the wait; the key comes from OPENAI_API_KEY."""
    import threading

    seen: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def accept_and_stall():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            seen.append(conn.recv(65536))  # the request, then no answer

    threading.Thread(target=accept_and_stall, daemon=True).start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    port = listener.getsockname()[1]
    backend = ServerBackend(f"http://127.0.0.1:{port}/v1", "m", "chat", timeout=0.5, retries=1)
    start = time.monotonic()
    with pytest.raises(ConnectionError, match="no answer after 2 tries"):
        backend("hello")
    listener.close()
    assert time.monotonic() - start < 10
    assert len(seen) == 2 and b"POST /v1/chat/completions" in seen[0]
    assert b"sk-test-key" in seen[0]


def test_annotate_stage_with_the_llm(server, trained_micro_run, tmp_path):
    base_url, model = server
    cfg, original = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(original, run)
    pseudo = run / "pseudo" / "inversion"
    pseudo.mkdir(parents=True)
    rows = [{"text": t, "candidate_id": f"c{i}", "source": "self"} for i, t in enumerate(KNOWN)]
    rows.append(
        {"text": "Nothing to see from 10.9.8.7 here.", "candidate_id": "c9", "source": "self"}
    )
    (pseudo / "texts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = load_config(
        str(run / "config.yaml"),
        [
            f"synthesis.llm_base_url={base_url}",
            f"synthesis.llm_model={model}",
            "synthesis.llm_shots=0",
            "synthesis.llm_max_tokens=80",
            "synthesis.annotator_eval_records=20",
        ],
    )
    out = annotate(cfg, run, "llm")
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["annotator"] for r in got[:2]] == ["llm", "llm"]
    assert [s["value"] for s in got[0]["spans"]] == ["10.1.2.3", "zoe_k"]
    assert sum(got[0]["token_mask"]) > 0
    # The unseen text: either a memorized answer whose values are not in it (dropped), or
    # an unusable answer and a recorded fallback to the pattern detectors.
    if got[2]["annotator"] == "llm":
        assert got[2]["spans"] == []
    else:
        assert got[2]["annotator"] == "hybrid-fallback" and got[2]["fallback_reason"]
        assert "10.9.8.7" in [s["value"] for s in got[2]["spans"]]
    report = json.loads((pseudo / "annotator_eval.json").read_text())
    counts = report["llm_counts"]
    assert counts["llm"] == sum(r["annotator"] == "llm" for r in got)
    assert counts["fallback"] == sum(r["annotator"] == "hybrid-fallback" for r in got)
    assert counts["dropped_values"] >= 1


def test_annotate_cli_passes_the_server_flags(trained_micro_run, tmp_path, capsys):
    from dfsu.cli import main

    _, original = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(original, run)
    (run / "pseudo" / "inversion").mkdir(parents=True)
    texts = run / "pseudo" / "inversion" / "texts.jsonl"
    texts.write_text(json.dumps({"text": "from 10.0.0.1"}) + "\n")
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    assert (
        main(
            [
                "--quiet",
                "annotate",
                "--run",
                str(run),
                "--annotator",
                "llm",
                "--llm-base-url",
                dead,
                "--llm-model",
                "m",
                "synthesis.llm_retries=0",
                "synthesis.llm_timeout=1",
                "synthesis.annotator_eval_records=5",
            ]
        )
        == 0
    )
    row = json.loads((run / "pseudo" / "inversion" / "pseudo.jsonl").read_text())
    assert row["annotator"] == "hybrid-fallback" and dead in row["fallback_reason"]
    assert "fell back 1" in capsys.readouterr().err
