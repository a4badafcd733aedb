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


# Every code of ELASTIC_ERRNO_MAP (include/elastic/common.h), written out so
# that linters, IDEs and readers see them: elastic.errors.ERECONFIGURE == -17.
# The values are stable (the ABI); test_errors.py checks this list against the
# loaded library's names, so a code added to the header must be added here.
EINVAL = -1
ENOMEM = -2
ETIMEDOUT = -3
ENOTFOUND = -4
ECLOSED = -5
EAUTH = -6
EPROTO = -7
EIO = -8
ECONNECT = -9
ELIMIT = -10
EEXIST = -11
ENOSPC = -12
EPERM = -13
ECORRUPT = -14
EBUSY = -15
ECANCELED = -16
ERECONFIGURE = -17
EUNSUPPORTED = -18
EBUDGET = -19
ESTATE = -20
ESYS = -21
ERANGE = -22
ENOTENOUGH = -23
EROFS = -24
EDIVERGED = -25

CODES = {
    "EINVAL": EINVAL,
    "ENOMEM": ENOMEM,
    "ETIMEDOUT": ETIMEDOUT,
    "ENOTFOUND": ENOTFOUND,
    "ECLOSED": ECLOSED,
    "EAUTH": EAUTH,
    "EPROTO": EPROTO,
    "EIO": EIO,
    "ECONNECT": ECONNECT,
    "ELIMIT": ELIMIT,
    "EEXIST": EEXIST,
    "ENOSPC": ENOSPC,
    "EPERM": EPERM,
    "ECORRUPT": ECORRUPT,
    "EBUSY": EBUSY,
    "ECANCELED": ECANCELED,
    "ERECONFIGURE": ERECONFIGURE,
    "EUNSUPPORTED": EUNSUPPORTED,
    "EBUDGET": EBUDGET,
    "ESTATE": ESTATE,
    "ESYS": ESYS,
    "ERANGE": ERANGE,
    "ENOTENOUGH": ENOTENOUGH,
    "EROFS": EROFS,
    "EDIVERGED": EDIVERGED,
}
