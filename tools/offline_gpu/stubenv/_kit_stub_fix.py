"""Imported at start-up (through zz_kit.pth) by every Python that runs from the kit's stub env,
the Triton Python stub of nvidia-pytriton 0.7.0 included.

That stub embeds Python with an *isolated* configuration (pybind11 2.10.0 behaviour): PYTHONPATH
and PYTHONUTF8 are ignored, and the C locale is never configured, so open() without an encoding
reads ASCII. `import vllm` then fails inside the stub (torch._inductor reads a UTF-8 template:
"UnicodeDecodeError: 'ascii' codec can't decode byte 0xe2"). Set a UTF-8 LC_CTYPE here, and give
the embedded interpreter a sys.argv if it has none."""
import locale
import sys

try:
    if locale.getpreferredencoding(False).replace("-", "").lower() != "utf8":
        for _name in ("C.UTF-8", "C.utf8", "en_US.UTF-8", ""):
            try:
                locale.setlocale(locale.LC_CTYPE, _name)
                break
            except locale.Error:
                continue
except Exception:  # never break interpreter start-up
    pass
if not getattr(sys, "argv", None):
    sys.argv = [sys.executable or "python3"]


def hide(*names):
    """Make packages of the host's environment invisible to this interpreter (importlib.util.find_spec -> None,
    `import` -> ImportError). Used in the numpy-1.26 stub env for scipy 1.18 (built for numpy >= 2:
    under numpy 1.26 its import dies on `np.long`, and transformers imports it whenever it is
    installed, which took `from vllm import LLM` down with it on the H200 machine). With scipy
    hidden, transformers' generation utils then died importing sklearn 1.x (needs scipy.sparse),
    so sklearn is hidden too (install_kit.sh: KIT_HIDE="scipy sklearn"; that pair is untested
    on the device)."""
    for n in names:
        sys.modules.setdefault(n, None)
