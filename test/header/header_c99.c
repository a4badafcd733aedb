/* Compiled alone with -std=c99 -pedantic -Werror and as C++: the public
 * header must need nothing else and use no GNU or C11 extensions. */
#include <elastic.h>

int main(void)
{
    elastic_store_opts opts;
    if (elastic_store_opts_init(&opts, sizeof opts) != 0) return 1;
    return elastic_version() == ELASTIC_VERSION_HEX ? 0 : 1;
}
