/*
 * Read first by every object of elasticctl's own code (the Makefile passes
 * -include): that code reports failures through elastic__fail, which fills
 * ctl_last_error() (fail.c). The library's elastic_last_error() only says
 * what the library's own calls did, so reading it here would print an empty
 * or stale detail: the compiler refuses it.
 */
#ifndef ELASTICCTL_PRIVATE_H
#define ELASTICCTL_PRIVATE_H

#include "elastic.h"

#pragma GCC poison elastic_last_error

#endif /* ELASTICCTL_PRIVATE_H */
