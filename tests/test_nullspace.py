"""Null-space LoRA (unlearning.null_space): the subspace rule, and that an update kept off the
retain inputs leaves the model's outputs on them unchanged while it changes others."""

import torch
from peft import LoraConfig, get_peft_model
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

from dfsu.unlearning.nullspace import distinct, principal_bases, projector, top_subspace


def test_the_subspace_holds_the_asked_share_of_energy_with_as_few_directions_as_possible():
    q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    moment = q @ torch.diag(torch.tensor([9.0, 0.0, 1.0, 0.0], dtype=torch.float64)) @ q.T
    one = top_subspace(moment, 0.85)  # 9 of 10
    two = top_subspace(moment, 0.95)
    assert one.shape == (4, 1) and two.shape == (4, 2)
    assert torch.allclose((one.T.double() @ q[:, 0]).abs(), torch.ones(1).double(), atol=1e-5)
    assert torch.allclose(two.T @ two, torch.eye(2), atol=1e-5)


def _adapted(seed: int = 0):
    torch.manual_seed(seed)
    config = GPTNeoXConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    model = GPTNeoXForCausalLM(config)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["dense_h_to_4h", "dense_4h_to_h"])
    return get_peft_model(model, lora)


def _train(model, forget: torch.Tensor, bases=None, steps: int = 5) -> None:
    """Gradient ascent on ``forget``; the adapters projected after each step when ``bases``."""
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    model.train()
    project = projector(model, bases) if bases else None
    if project:
        project()
    for _ in range(steps):
        loss = -model(input_ids=forget, labels=forget).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if project:
            project()
    model.eval()


def test_an_update_kept_off_the_retain_inputs_leaves_their_outputs_unchanged():
    """A retain text of 6 tokens spans at most 6 of each layer's input dimensions: with the
    adapters off them, every layer's output on it is unchanged, so the logits are too (break:
    no projection, or A projected on the wrong side, changes them as much as elsewhere)."""
    retain = torch.tensor([[1, 5, 9, 13, 17, 21]])
    forget = torch.tensor([[2, 30, 31, 40, 41, 50, 51, 60]])
    logits = {}
    for constrained in (False, True):
        model = _adapted()
        model.eval()
        with torch.no_grad():
            before = model(input_ids=retain).logits, model(input_ids=forget).logits
        encoded = [{"input_ids": retain[0].tolist(), "pii": [0] * 6}]
        bases = principal_bases(model, encoded, 0, 0.999999, "cpu") if constrained else None
        # B starts at zero: give it weight so A's projection is what keeps retain still
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.data.normal_(0, 0.5)
        _train(model, forget, bases)
        with torch.no_grad():
            after = model(input_ids=retain).logits, model(input_ids=forget).logits
        logits[constrained] = [
            (a - b).abs().max().item() for a, b in zip(after, before, strict=True)
        ]
    moved_retain, moved_forget = logits[True]
    assert moved_forget > 0.1  # the constrained update still changes the forget text
    assert moved_retain < 1e-3 * moved_forget
    assert logits[False][0] > 0.1  # unconstrained, the retain text moves too


def test_a_repeated_retain_text_is_read_once_and_weighted_by_its_count():
    """``retain_self_copies`` repeats a recitation in the retain text: the subspace is the one
    of the moment over every copy, taken by a naive reference here (breaks: copies dropped
    without their weight, or padding counted)."""
    model = _adapted()
    texts = [[1, 5, 9, 13], [2, 30, 31, 40, 41, 50], [7, 7, 8]]
    encoded = [{"input_ids": t, "pii": [0] * len(t)} for t in texts]
    retain = encoded[:1] + encoded[1:2] * 5 + encoded[2:] * 2
    assert distinct(retain) == ([encoded[0], encoded[1], encoded[2]], [1, 5, 2])
    moments = {}
    layers = {n: m for n, m in model.named_modules() if hasattr(m, "lora_A") and len(m.lora_A)}

    def hook(name):
        def record(_module, args):
            x = args[0].detach().float().reshape(-1, args[0].shape[-1])
            moments[name] = moments.get(name, 0) + x.T @ x

        return record

    handles = [m.register_forward_pre_hook(hook(n)) for n, m in layers.items()]
    with torch.no_grad():
        for item in retain:  # one at a time: no padding
            model(input_ids=torch.tensor([item["input_ids"]]))
    for h in handles:
        h.remove()
    bases = principal_bases(model, retain, 0, 0.99, "cpu", batch=2)
    assert bases.keys() == moments.keys()
    for name, moment in moments.items():
        expected = top_subspace(moment, 0.99)
        assert bases[name].shape == expected.shape
        assert torch.allclose(bases[name] @ bases[name].T, expected @ expected.T, atol=1e-4)
