"""Regenerate the fixture models in this folder with real exporters.

Every model is built from a tiny config with seeded random weights and written by
``torch.onnx.export``: the legacy TorchScript exporter (``dynamo=False``) and, where it
works, the dynamo exporter. Needs torch and transformers, which are not runtime or test
dependencies of asc-onnx:

    python -m venv /tmp/fix && /tmp/fix/bin/pip install torch==2.13.0 transformers onnx onnxscript
    /tmp/fix/bin/python models/make_fixtures.py            # all fixtures
    /tmp/fix/bin/python models/make_fixtures.py llama_tiny  # one family

The list of written files and what each exporter produced goes to ``fixtures.json``.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
SEQ = 8


class TinySiluCnn(nn.Module):
    """A YOLO-like Conv+BN+SiLU stack with a pooled linear head (built by hand: no timm)."""

    def __init__(self) -> None:
        super().__init__()
        chans = [3, 8, 16, 16]
        layers: list[nn.Module] = []
        for cin, cout in zip(chans, chans[1:]):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1), nn.BatchNorm2d(cout), nn.SiLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x).mean(dim=(2, 3))
        return self.head(y) * torch.sigmoid(self.head(y))


def _lm(cls_name: str, config_name: str, attn: str = "eager", **cfg):
    import transformers

    config = getattr(transformers, config_name)(**cfg)
    # eager: plain MatMul/Softmax attention, which both exporters take; sdpa: torch's
    # scaled_dot_product_attention, which the legacy exporter decomposes (scale on q and on k^T)
    config._attn_implementation = attn
    model = getattr(transformers, cls_name)(config)
    return model


#: The tiny text config every transformer fixture shares, and its input's dynamic axes.
COMMON = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=64)
TEXT_AXES = {"input_ids": {0: "batch", 1: "seq"}}


def _seeded_ids() -> torch.Tensor:
    """Seed torch (the weights drawn next depend on it) and draw the example input_ids."""
    torch.manual_seed(0)
    return torch.randint(0, 96, (1, SEQ))


def build(name: str):
    """Return (module, example inputs, input names, dynamic axes) for one fixture family."""
    ids = _seeded_ids()
    if name == "llama_tiny":
        m = _lm("LlamaModel", "LlamaConfig", num_key_value_heads=2, **COMMON)
        return m, (ids,), ["input_ids"], TEXT_AXES
    if name == "qwen2_tiny":
        m = _lm("Qwen2Model", "Qwen2Config", num_key_value_heads=2, **COMMON)
        return m, (ids,), ["input_ids"], TEXT_AXES
    if name == "bert_tiny":
        m = _lm("BertModel", "BertConfig", **COMMON)
        return m, (ids,), ["input_ids"], TEXT_AXES
    if name == "gpt2_tiny":
        m = _lm("GPT2Model", "GPT2Config", vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64)
        return m, (ids,), ["input_ids"], TEXT_AXES
    if name == "vit_tiny":
        m = _lm("ViTModel", "ViTConfig", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, image_size=32, patch_size=8, num_channels=3)
        return m, (torch.randn(1, 3, 32, 32),), ["pixel_values"], {"pixel_values": {0: "batch"}}
    if name == "cnn_silu":
        return TinySiluCnn(), (torch.randn(1, 3, 32, 32),), ["images"], {"images": {0: "batch"}}
    raise KeyError(name)


FAMILIES = ["llama_tiny", "qwen2_tiny", "bert_tiny", "gpt2_tiny", "vit_tiny", "cnn_silu"]
FP16 = {"llama_tiny", "cnn_silu"}


class _FirstOutput(nn.Module):
    """Export only the main output tensor (last_hidden_state / logits)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        if isinstance(out, torch.Tensor):
            return out
        return out[0]


def export(name: str, exporter: str, dtype: torch.dtype) -> Path:
    module, args, in_names, axes = build(name)
    module = _FirstOutput(module.eval())
    if dtype == torch.float16:
        module = module.half()
        args = tuple(a.half() if a.is_floating_point() else a for a in args)
    suffix = "_fp16" if dtype == torch.float16 else ""
    path = HERE / f"{name}_{exporter}{suffix}.onnx"
    kwargs = dict(input_names=in_names, output_names=["output"])
    with torch.no_grad():
        if exporter == "legacy":
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=17,
                              dynamic_axes={**axes, "output": {0: "batch"}}, **kwargs)
        else:
            shapes = {"x": {0: torch.export.Dim("batch", max=64)}}
            torch.onnx.export(module, args, str(path), dynamo=True, opset_version=18,
                              dynamic_shapes=shapes, external_data=False, **kwargs)
    return path


class _WithMask(nn.Module):
    """A causal LM called with input_ids and attention_mask, exporting only the logits."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.inner(input_ids=ids, attention_mask=mask, use_cache=False).logits


class _DecodeStep(nn.Module):
    """One decode step of a causal LM: the new token's ids and every layer's past keys and values in; the logits
    and every layer's present keys and values (past + the new row, a KV-cache Concat) out."""

    def __init__(self, inner: nn.Module, layers: int) -> None:
        super().__init__()
        self.inner = inner
        self.layers = layers

    def forward(self, ids: torch.Tensor, *past: torch.Tensor):
        from transformers import DynamicCache

        cache = DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.inner(input_ids=ids, past_key_values=cache, use_cache=True)
        present = []
        for i in range(self.layers):
            layer = out.past_key_values.layers[i] if hasattr(out.past_key_values, "layers") else None
            k, v = (layer.keys, layer.values) if layer is not None else out.past_key_values[i]
            present += [k, v]
        return (out.logits, *present)


def _decode_form():
    """LlamaForCausalLM's decode step (GQA 4:2, head dim 8) with 5 past positions, all outputs dynamic in them."""
    m = _DecodeStep(_lm("LlamaForCausalLM", "LlamaConfig", num_key_value_heads=2, **COMMON), 2)
    torch.manual_seed(1)
    past = [torch.randn(1, 2, 5, 8) for _ in range(4)]
    ids = torch.randint(0, 96, (1, 1))
    names = ["input_ids"] + [f"past_{kv}{i}" for i in range(2) for kv in ("key", "value")]
    outs = ["logits"] + [f"present_{kv}{i}" for i in range(2) for kv in ("key", "value")]
    axes = {"input_ids": {0: "batch"}, "logits": {0: "batch"}}
    axes.update({n: {0: "batch", 2: "past"} for n in names[1:]})
    axes.update({n: {0: "batch", 2: "total"} for n in outs[1:]})
    return m, (ids, *past), names, outs, axes


def form(name: str) -> tuple[nn.Module, tuple, list[str], dict, int, torch.dtype]:
    """One exporter form the front door must take: (module, inputs, input names, dynamic axes, opset, dtype).
    All legacy exports (``dynamo=False``), as engineers still write them."""
    ids = _seeded_ids()
    if name == "bert_fp16_opset14":
        # opset 14: at 17 the legacy exporter writes a LayerNormalization with mixed fp16/fp32 inputs that
        # onnxruntime refuses to load.
        return _FirstOutput(_lm("BertModel", "BertConfig", **COMMON)), (ids,), ["input_ids"], TEXT_AXES, 14, \
            torch.float16
    if name == "llama_causal_fp16_mask":
        # transformers 4.5x builds the mask with torch.vmap on torch >= 2.6, which the legacy (TorchScript)
        # exporter cannot trace ("unordered_map::at"); its pre-2.6 path is what older exports contain.
        import transformers.masking_utils as masks

        masks._is_torch_greater_or_equal_than_2_6 = False
        masks.sdpa_mask = masks.sdpa_mask_older_torch
        masks.ALL_MASK_ATTENTION_FUNCTIONS._global_mapping["sdpa"] = masks.sdpa_mask_older_torch
        m = _WithMask(_lm("LlamaForCausalLM", "LlamaConfig", num_key_value_heads=2, **COMMON))
        mask = torch.ones(1, SEQ, dtype=torch.int64)
        axes = {**TEXT_AXES, "attention_mask": {0: "batch", 1: "seq"}}
        return m, (ids, mask), ["input_ids", "attention_mask"], axes, 17, torch.float16
    if name == "llama_sdpa":
        # transformers' default attention: torch's scaled_dot_product_attention, decomposed by the exporter
        # (its symbolic refuses enable_gqa, which transformers sets for grouped KV heads: 4 KV heads here)
        m = _lm("LlamaModel", "LlamaConfig", attn="sdpa", num_key_value_heads=4, **COMMON)
        return _FirstOutput(m), (ids,), ["input_ids"], TEXT_AXES, 17, torch.float32
    if name == "phi3_tiny":
        m = _lm("Phi3Model", "Phi3Config", num_key_value_heads=4, pad_token_id=0, **COMMON)
        return _FirstOutput(m), (ids,), ["input_ids"], TEXT_AXES, 17, torch.float32
    if name == "levit_tiny":
        m = _lm("LevitModel", "LevitConfig", image_size=64, hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2],
                depths=[1, 1, 1], key_dim=[8, 8, 8], patch_size=16)
        return _FirstOutput(m), (torch.randn(1, 3, 64, 64),), ["pixel_values"], {"pixel_values": {0: "batch"}}, \
            13, torch.float32
    if name == "clip_text_tiny":
        m = _lm("CLIPTextModel", "CLIPTextConfig", vocab_size=128, hidden_size=32, intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=77)
        return _FirstOutput(m), (torch.randint(0, 96, (1, 77)),), ["input_ids"], {"input_ids": {0: "batch"}}, 17, \
            torch.float32
    raise KeyError(name)


FORMS = ["bert_fp16_opset14", "llama_causal_fp16_mask", "phi3_tiny", "levit_tiny", "clip_text_tiny", "llama_sdpa",
         "llama_decode"]


def export_form(name: str) -> Path:
    if name == "llama_decode":
        module, args, in_names, out_names, axes = _decode_form()
        path = HERE / f"{name}_legacy.onnx"
        with torch.no_grad():
            torch.onnx.export(module.eval(), args, str(path), dynamo=False, opset_version=17, input_names=in_names,
                              output_names=out_names, dynamic_axes=axes)
        return path
    module, args, in_names, axes, opset, dtype = form(name)
    module = module.eval()
    if dtype == torch.float16:
        module = module.half()
    path = HERE / f"{name}_legacy.onnx"
    with torch.no_grad():
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=opset, input_names=in_names,
                          output_names=["output"], dynamic_axes={**axes, "output": {0: "batch"}})
    return path


#: Inputs as the front door meets them: every exporter's spelling of a dynamic dim, an image model with dynamic N, H
#: and W, the dynamo exporter's NaN-guarded attention, quantized transformer blocks and a branch on a scalar input.
DOORS = ["cnn_dims", "sdpa_bool_mask", "bert_quant", "if_rate"]

#: Input dims as other exporters spell them, written over the legacy export's (torch writes named dims only):
#: paddle2onnx, tf2onnx and a declared -1 batch with a fixed image size.
RESPELLED = {"paddle": ["p2o.DynamicDimension.0", 3, "?", "?"], "unk": ["unk__214", 3, "unk__215", "unk__216"],
             "minus1": [-1, 3, 64, 64]}


class _SdpaBoolMask(nn.Module):
    """One attention block through torch's scaled_dot_product_attention with a boolean mask: the dynamo exporter
    guards its probabilities with Where(IsNaN(p), 0, p) (a row masked everywhere gives zeros)."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class _RateBranch(nn.Module):
    """An audio front end that branches on its sample rate (a scalar input), as speech models do."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, rate: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        if bool(rate > 16000):
            h = h[:, ::2]
        return h * torch.sigmoid(h)


def export_door(name: str) -> list[Path]:
    """The front-door fixtures of one kind; returns the files written."""
    torch.manual_seed(0)
    if name == "cnn_dims":
        module = TinySiluCnn().eval()
        x = torch.randn(2, 3, 64, 64)
        legacy, dynamo = HERE / "cnn_dynamic_hw_legacy.onnx", HERE / "cnn_dynamic_hw_dynamo.onnx"
        with torch.no_grad():
            torch.onnx.export(module, (x,), str(legacy), dynamo=False, opset_version=17, input_names=["images"],
                              output_names=["output"], dynamic_axes={"images": {0: "batch", 2: "height", 3: "width"},
                                                                     "output": {0: "batch"}})
            auto = torch.export.Dim.AUTO
            torch.onnx.export(module, (x,), str(dynamo), dynamo=True, opset_version=18, input_names=["images"],
                              output_names=["output"], dynamic_shapes={"x": {0: auto, 2: auto, 3: auto}},
                              external_data=False)
        import onnx

        out = [legacy, dynamo]
        for spelling, dims in RESPELLED.items():
            m = onnx.load(str(legacy))
            for d, v in zip(m.graph.input[0].type.tensor_type.shape.dim, dims):
                d.Clear()
                if isinstance(v, int):
                    d.dim_value = v
                else:
                    d.dim_param = v
            out.append(HERE / f"cnn_{spelling}_dims_legacy.onnx")
            onnx.save(m, str(out[-1]))
        return out
    if name == "sdpa_bool_mask":
        path = HERE / "sdpa_bool_mask_dynamo.onnx"
        x, mask = torch.randn(1, 16, 32), torch.ones(1, 1, 16, 16, dtype=torch.bool).tril()
        seq = torch.export.Dim("seq", min=2, max=1024)
        with torch.no_grad():
            torch.onnx.export(_SdpaBoolMask().eval(), (x, mask), str(path), dynamo=True, opset_version=18,
                              input_names=["x", "mask"], output_names=["output"], external_data=False,
                              dynamic_shapes={"x": {1: seq}, "mask": {2: seq, 3: seq}})
        return [path]
    if name == "bert_quant":
        # onnxruntime's own quantizer on the tiny BERT: dynamic (DynamicQuantizeLinear, MatMulInteger) and static
        # QDQ (QuantizeLinear/DequantizeLinear pairs, calibrated on random token ids)
        import numpy as np
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static

        module, args, in_names, axes = build("bert_tiny")
        fp32 = HERE / "_bert_fp32.onnx"
        with torch.no_grad():
            torch.onnx.export(_FirstOutput(module.eval()), args, str(fp32), dynamo=False, opset_version=17,
                              input_names=in_names, output_names=["output"],
                              dynamic_axes={**axes, "output": {0: "batch", 1: "seq"}})

        class Ids(CalibrationDataReader):
            def __init__(self) -> None:
                rng = np.random.default_rng(0)
                self.batches = iter([{"input_ids": rng.integers(0, 96, (1, SEQ)).astype(np.int64)}
                                     for _ in range(8)])

            def get_next(self):
                return next(self.batches, None)

        dyn, qdq = HERE / "bert_quant_dynamic.onnx", HERE / "bert_quant_qdq.onnx"
        quantize_dynamic(str(fp32), str(dyn))
        quantize_static(str(fp32), str(qdq), Ids(), quant_format=QuantFormat.QDQ)
        fp32.unlink()
        return [dyn, qdq]
    if name == "if_rate":
        path = HERE / "if_rate_legacy.onnx"
        module = torch.jit.script(_RateBranch().eval())
        with torch.no_grad():
            torch.onnx.export(module, (torch.randn(1, 8, 16), torch.tensor(16000)), str(path), dynamo=False,
                              opset_version=17, input_names=["x", "rate"], output_names=["output"],
                              dynamic_axes={"x": {0: "batch", 1: "frames"}})
        return [path]
    raise KeyError(name)


def main(argv: list[str]) -> int:
    families = [a for a in argv if a in FAMILIES] or ([] if argv else FAMILIES)
    record: dict[str, str] = {}
    for name in [a for a in argv if a in DOORS] or ([] if argv else DOORS):
        try:
            for i, path in enumerate(export_door(name)):
                record[f"{name}/{i}"] = path.name
        except Exception as exc:  # noqa: BLE001 - record why the exporter failed
            traceback.print_exc()
            record[f"{name}/0"] = f"FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        print(name, "->", record.get(f"{name}/0"), flush=True)
    for name in [a for a in argv if a in FORMS] or ([] if argv else FORMS):
        try:
            record[f"{name}/legacy"] = export_form(name).name
        except Exception as exc:  # noqa: BLE001 - record why the exporter failed
            traceback.print_exc()
            record[f"{name}/legacy"] = f"FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        print(name, "->", record[f"{name}/legacy"], flush=True)
    for name in families:
        for exporter in ("legacy", "dynamo"):
            for dtype in [torch.float32] + ([torch.float16] if name in FP16 else []):
                key = f"{name}/{exporter}/{dtype}"
                try:
                    record[key] = export(name, exporter, dtype).name
                except Exception as exc:  # noqa: BLE001 - record why an exporter failed
                    traceback.print_exc()
                    record[key] = f"FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                print(key, "->", record[key], flush=True)
    out = HERE / "fixtures.json"
    old = json.loads(out.read_text()) if out.exists() else {}
    old.update(record)
    out.write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
