"""Built-in pattern modules, one per family. Each module defines ``RULES: list[Rule]``.

These files are package data of ``asc_onnx`` and are loaded by the same loader as a user's
``--patterns my_patterns.py`` (:mod:`asc_onnx.registry`).
"""
