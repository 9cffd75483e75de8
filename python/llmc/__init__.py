"""Python bindings for the llmc runtime: ctypes over libllmc's C API (include/llmc/llmc.h).

    engine = llmc.Engine("stories.plan")
    engine.generate("Once upon a time", max_tokens=40)
    for piece in engine.stream("Once upon a time", temperature=0.8, seed=1): ...
    llmc.ChatTemplate(source).render(messages, add_generation_prompt=True)
    with llmc.Scheduler(engine) as s: s.submit("Once upon a time"); s.run()
"""

from ._engine import Engine, GenerateResult, LlmcError, ModelInfo, library_version
from ._chat import ChatTemplate, Completion, Scheduler

__all__ = ["ChatTemplate", "Completion", "Engine", "GenerateResult", "LlmcError", "ModelInfo",
           "Scheduler", "library_version"]
__version__ = "0.1.0"
