"""The paper's annotator: few-shot prompting of an LLM that lists the PII in a text.

The model answers with a JSON list of ``{"value", "label"}``; offsets are computed here
(every occurrence of each value), values absent from the text are dropped and counted.
Backends: a local Hugging Face causal LM directory, or any OpenAI-compatible server
(vLLM, Ollama, `transformers serve`) by base URL through the ``openai`` client, with a
timeout and retries. When a request fails or the answer is not a usable JSON list, that one
text falls back to an offline annotator (the hybrid of the tagger and the detectors in a
run; the detectors alone when none is given), and the fallback is recorded with its reason.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from dfsu.pii.detectors import detect, resolve_overlaps
from dfsu.pii.records import Span, canonical_label

INSTRUCTION = (
    "List the personally identifiable information (PII) in the text as a JSON list of "
    'objects with "value" (copied exactly from the text) and "label" (e.g. FIRSTNAME, '
    "LASTNAME, EMAIL, PHONENUMBER, IPV4, IPV6, USERAGENT, STREET, CITY, SSN, IBAN, "
    "CREDITCARDNUMBER, DATE, URL, USERNAME, ACCOUNTNUMBER). Answer [] when there is none."
)

EXAMPLES = [
    (
        "Login alert: user mkeller7 signed in from 81.2.69.160.",
        [{"value": "mkeller7", "label": "USERNAME"}, {"value": "81.2.69.160", "label": "IPV4"}],
    ),
    (
        "Refund for Jana Novak, IBAN DE44500105175407324931, sent on 2021-03-04.",
        [
            {"value": "Jana", "label": "FIRSTNAME"},
            {"value": "Novak", "label": "LASTNAME"},
            {"value": "DE44500105175407324931", "label": "IBAN"},
            {"value": "2021-03-04", "label": "DATE"},
        ],
    ),
    ("The fresh bread was baked in the oven.", []),
]


def build_prompt(text: str, shots: int = 3) -> str:
    parts = [INSTRUCTION, ""]
    for example, answer in EXAMPLES[:shots]:
        parts += [f"Text: {example}", f"PII: {json.dumps(answer)}", ""]
    parts += [f"Text: {text}", "PII:"]
    return "\n".join(parts)


_ARRAY = re.compile(r"\[.*?\]", re.S)


def parse_entities(answer: str) -> list[dict[str, str]] | None:
    """The first JSON list of {value, label} objects in an answer; None when there is none."""
    for match in _ARRAY.finditer(answer):
        try:
            items = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(items, list) and all(
            isinstance(i, dict)
            and isinstance(i.get("value"), str)
            and isinstance(i.get("label"), str)
            for i in items
        ):
            return [{"value": i["value"], "label": canonical_label(i["label"])} for i in items]
    return None


def locate(text: str, entities: list[dict[str, str]]) -> tuple[list[Span], int]:
    """Spans for every occurrence of every value; (spans, number of values not in the text)."""
    spans, dropped = [], 0
    for item in entities:
        value = item["value"].strip()
        if not value or value not in text:
            dropped += 1
            continue
        start = text.find(value)
        while start != -1:
            spans.append(Span(value, start, start + len(value), item["label"]))
            start = text.find(value, start + 1)
    return resolve_overlaps(spans), dropped


class ServerBackend:
    """An OpenAI-compatible server (``{base_url}/completions`` or ``/chat/completions``)
    through the ``openai`` client: its timeout and retries with back-off. The key is
    ``api_key``, else ``OPENAI_API_KEY``, else a placeholder (local servers ask for none)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api: str = "completions",
        timeout: float = 60.0,
        retries: int = 2,
        max_tokens: int = 256,
        api_key: str | None = None,
    ):
        from openai import OpenAI

        self.url = base_url.rstrip("/") + ("/chat/completions" if api == "chat" else "/completions")
        self.model, self.api, self.retries, self.max_tokens = model, api, retries, max_tokens
        key = api_key or os.environ.get("OPENAI_API_KEY") or "unused"
        self.client = OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=retries)

    def __call__(self, prompt: str) -> str:
        from openai import OpenAIError

        settings: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
        }
        try:
            if self.api == "chat":
                messages = [{"role": "user", "content": prompt}]
                reply = self.client.chat.completions.create(messages=messages, **settings)
                return reply.choices[0].message.content or ""
            return self.client.completions.create(prompt=prompt, **settings).choices[0].text
        except (OpenAIError, IndexError, AttributeError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            raise ConnectionError(
                f"{self.url}: no answer after {self.retries + 1} tries ({reason})"
            ) from None


class LocalBackend:
    """A local Hugging Face causal LM, greedy decoding."""

    def __init__(self, path: str, max_tokens: int = 256):
        from dfsu.components.models import load_causal_lm

        self.model, self.tokenizer = load_causal_lm(path)
        self.model.eval()
        self.max_tokens = max_tokens

    def __call__(self, prompt: str) -> str:
        import torch

        enc = self.tokenizer(prompt, return_tensors="pt")
        with torch.no_grad():
            out = self.model.generate(
                **enc,
                max_new_tokens=self.max_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return self.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


@dataclass
class LLMAnnotator:
    backend: Any
    shots: int = 3
    counts: dict[str, int] = field(
        default_factory=lambda: {"llm": 0, "fallback": 0, "dropped_values": 0}
    )
    # The offline annotator a text falls back to (text -> spans); None: the pattern detectors.
    fallback: Any = None
    # After this many failed requests in a row the server is not asked again (0 = never give up).
    max_failures: int = 3
    failures_in_a_row: int = 0
    gave_up: str | None = None

    def __call__(self, text: str) -> tuple[list[Span], str, str | None]:
        """(spans, who annotated, why it fell back or None)."""
        if self.gave_up:
            return self._fallback(text, self.gave_up)
        try:
            answer = self.backend(build_prompt(text, self.shots))
        except ConnectionError as exc:
            self.failures_in_a_row += 1
            if self.max_failures and self.failures_in_a_row >= self.max_failures:
                self.gave_up = f"not asked: {self.failures_in_a_row} requests in a row failed"
                self.counts["gave_up"] = 1
            return self._fallback(text, f"request failed: {exc}")
        self.failures_in_a_row = 0
        entities = parse_entities(answer)
        if entities is None:
            return self._fallback(text, "answer is not a JSON list of {value, label}")
        spans, dropped = locate(text, entities)
        self.counts["llm"] += 1
        self.counts["dropped_values"] += dropped
        return spans, "llm", None

    def _fallback(self, text: str, reason: str) -> tuple[list[Span], str, str]:
        self.counts["fallback"] += 1
        if self.fallback is None:
            return detect(text), "pattern-fallback", reason
        return self.fallback(text), "hybrid-fallback", reason
