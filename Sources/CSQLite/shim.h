#ifndef STELE_CSQLITE_SHIM_H
#define STELE_CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import; SteleSQL builds the
// same destructor value with unsafeBitCast(-1, ...). Nothing else is needed here.

#endif
