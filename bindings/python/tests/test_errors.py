"""elastic.errors: the codes are written out (not made at import), and the
list matches what the loaded library names, in both directions."""

import elastic
from elastic import errors
from elastic._lib import lib


def test_every_code_is_a_module_constant_that_the_library_names_the_same():
    unknown = lib.elastic_err_name(-1000)
    names = {}
    for value in range(-1, -1000, -1):
        name = lib.elastic_err_name(value)
        if name == unknown:
            break
        names[name.decode()[len("ELASTIC_"):]] = value
    assert names == errors.CODES
    assert errors.ERECONFIGURE == -17 and errors.ECLOSED == -5
    source = open(errors.__file__).read()
    assert "globals()" not in source
    for name in names:  # each one spelled in the source, so static tools see it
        assert "\n%s = " % name in source, name


def test_an_error_carries_its_code_name_and_detail():
    exc = elastic.ElasticError(errors.ERECONFIGURE, "step 3 abandoned", "save")
    assert exc.code == errors.ERECONFIGURE and exc.name == "ELASTIC_ERECONFIGURE"
    assert str(exc).startswith("save: ELASTIC_ERECONFIGURE (") and str(exc).endswith("step 3 abandoned")
