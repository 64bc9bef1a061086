#ifndef STELE_CZLIB_SHIM_H
#define STELE_CZLIB_SHIM_H

#include <zlib.h>

// deflateInit and inflateInit are macros (they pass the library version and the
// stream size); Swift needs functions to call.
static inline int stele_deflate_init(z_streamp stream, int level) {
    return deflateInit(stream, level);
}

static inline int stele_inflate_init(z_streamp stream) {
    return inflateInit(stream);
}

#endif
