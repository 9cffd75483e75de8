"""Python bindings for the llmc runtime: ctypes over libllmc's C API (include/llmc/llmc.h).

    engine = llmc.Engine("stories.plan")
    engine.generate("Once upon a time", max_tokens=40)
    for piece in engine.stream("Once upon a time", temperature=0.8, seed=1): ...
"""

from ._engine import Engine, GenerateResult, LlmcError, ModelInfo, library_version

__all__ = ["Engine", "GenerateResult", "LlmcError", "ModelInfo", "library_version"]
__version__ = "0.1.0"
