"""The one exception the package raises for a failed library call: it carries
the ELASTIC_E* code, its name and the library's detail for the calling thread."""

from ._lib import lib


class ElasticError(Exception):
    def __init__(self, code, detail="", what=""):
        self.code = code
        self.name = lib.elastic_err_name(code).decode()
        self.detail = detail
        text = lib.elastic_strerror(code).decode()
        parts = [p for p in (what, "%s (%s)" % (self.name, text), detail) if p]
        super().__init__(": ".join(parts))


def check(rc, what=""):
    """Raises ElasticError for a negative return code; passes 0 through."""
    if rc < 0:
        raise ElasticError(rc, (lib.elastic_last_error() or b"").decode(errors="replace"), what)
    return rc


# Every code of ELASTIC_ERRNO_MAP, by its short name: elastic.errors.ETIMEDOUT == -3.
def _codes():
    codes = {}
    unknown = lib.elastic_err_name(-1000)
    for value in range(-1, -1000, -1):
        name = lib.elastic_err_name(value)
        if name == unknown:
            break
        codes[name.decode()[len("ELASTIC_"):]] = value
    return codes


CODES = _codes()
globals().update(CODES)
