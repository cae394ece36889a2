#ifndef KEEPTRACK_CGPS_SHIM_H
#define KEEPTRACK_CGPS_SHIM_H
#include <gps.h>

/// `gps_stream` with a device path filter (`WATCH_DEVICE`); Swift passes a C string.
static inline int keeptrack_gps_watch(struct gps_data_t *data, unsigned int flags, const char *device) {
    return gps_stream(data, flags, (void *)device);
}

/// The `set` mask bits as a 64-bit value (macros of type gps_mask_t).
static inline unsigned long long keeptrack_tpv_mask(void) { return (unsigned long long)(LATLON_SET | MODE_SET | TIME_SET); }
static inline unsigned long long keeptrack_sky_mask(void) { return (unsigned long long)(SATELLITE_SET | DOP_SET); }
#endif
