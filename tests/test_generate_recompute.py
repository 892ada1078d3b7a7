"""generate llm --recompute: each layer's forward (compute and TP all-reduces) re-runs before its backward."""

from __future__ import annotations

from collections import Counter

from chakra_pipe.et import TraceSet, schema
from chakra_pipe.generate.llm import generate_llm
from chakra_pipe.generate.options import resolve_llm

OPTS = {
    "model": "gpt3-13b",
    "layers": 4,
    "hidden": 512,
    "heads": 8,
    "ffn": 2048,
    "vocab": 1000,
    "seq": 128,
    "dp": 2,
    "tp": 2,
    "pp": 2,
    "microbatches": 3,
    "global_batch": 6,
}


def _load(tmp_path, name, **kw):
    model, spec = resolve_llm({**OPTS, **kw})
    generate_llm(model, spec, tmp_path / name)
    return model, spec, TraceSet.load(tmp_path / name)


def _names(ts):
    return [g.name(i) for g in ts.ranks for i in range(len(g.types))]


def _flops(ts):
    return sum(int(g.int_attr("num_ops")[g.types == schema.COMP_NODE].sum()) for g in ts.ranks)


def test_recompute_adds_one_forward_of_every_layer_and_its_all_reduces(tmp_path):
    model, spec, plain = _load(tmp_path, "plain")
    _, _, rc = _load(tmp_path, "rc", recompute=True)
    # Training FLOPs 3·fwd become 4·fwd for the layers (the LM head is not recomputed): extra = L·fwd(B·S).
    tokens = spec.global_batch * model.seq
    extra = model.layers * (model.attn_flops(tokens) + model.mlp_flops(tokens))
    assert _flops(rc) - _flops(plain) == extra  # summed over ranks: TP splits it, DP replicas share the batch
    names = Counter(n.rsplit(".", 1)[-1] if "recompute" in n else "" for n in _names(rc))
    ranks, microbatches, layers_per_stage = 8, 3, 2
    assert names["recompute"] == ranks * microbatches * layers_per_stage * 2  # attn + mlp compute
    assert names["tp_all_reduce"] == ranks * microbatches * layers_per_stage * 2
    # Without the flag no node is recomputed.
    assert all("recompute" not in n for n in _names(plain))
