#ifndef KEEPTRACK_CZLIB_SHIM_H
#define KEEPTRACK_CZLIB_SHIM_H
#include <zlib.h>

/// `inflateInit2` is a macro; Swift cannot import it.
static inline int keeptrack_inflateInit2(z_stream *strm, int windowBits) {
    return inflateInit2(strm, windowBits);
}
#endif
