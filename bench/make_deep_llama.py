"""Write the benchmark model: a LLaMA with 120 decoder layers (about 20,000 nodes) exported by
torch.onnx's legacy exporter from a tiny config with random weights.

Needs torch and transformers (not dependencies of asc-onnx); see models/make_fixtures.py:

    /tmp/fix/bin/python bench/make_deep_llama.py   # writes bench/llama_deep.onnx
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from make_fixtures import _FirstOutput, _lm  # noqa: E402

#: 80 layers give 13k nodes with this exporter; 120 reach the ~20k nodes the benchmark targets.
LAYERS = 120
OUT = Path(__file__).resolve().parent / "llama_deep.onnx"


def main() -> None:
    torch.manual_seed(0)
    m = _lm("LlamaModel", "LlamaConfig", vocab_size=128, hidden_size=16, intermediate_size=32,
            num_hidden_layers=LAYERS, num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    ids = torch.randint(0, 96, (1, 8))
    with torch.no_grad():
        torch.onnx.export(_FirstOutput(m.eval()), (ids,), str(OUT), dynamo=False, opset_version=17,
                          do_constant_folding=False,  # keep the shape arithmetic: ~260 nodes per layer
                          input_names=["input_ids"], output_names=["output"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "output": {0: "batch"}})
    print(OUT, OUT.stat().st_size)


if __name__ == "__main__":
    main()
