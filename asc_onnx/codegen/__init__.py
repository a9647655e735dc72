"""Stage 6, codegen: render kernel IR as Ascend C sources (kernel, tiling, host, ONNX plugin)."""
