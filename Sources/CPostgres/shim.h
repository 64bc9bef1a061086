#ifndef STELE_CPOSTGRES_SHIM_H
#define STELE_CPOSTGRES_SHIM_H

#include <libpq-fe.h>

#endif
