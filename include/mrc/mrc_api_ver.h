/* MRC application API version numbers (shaped after OCP mrc_api_ver.h). */
#ifndef MRC_API_VER_H
#define MRC_API_VER_H

/* maj.min.sub packed as maj<<24 | min<<16 | sub. */
#define MRC_API_VER(maj, min, sub) ((((maj)&0xFFu) << 24) | (((min)&0xFFu) << 16) | ((sub)&0xFFFFu))
#define MRC_API_VER_MAJOR(v) (((v) >> 24) & 0xFFu)
#define MRC_API_VER_MINOR(v) (((v) >> 16) & 0xFFu)
#define MRC_API_VER_SUB(v) ((v)&0xFFFFu)

#define MRC_API_VER_CURRENT MRC_API_VER(1, 0, 1)
#define MRC_API_VER_LAST_SUPPORTED MRC_API_VER(0, 0, 0)
#define MRC_API_VER_LATEST MRC_API_VER(0xFF, 0xFF, 0xFFFF)

/* The vendor (provider) API of this implementation: the software endpoint's own calls
 * (mrc_open_device, mrc_reg_mr, mrc_progress, ...). */
#define MRC_VENDOR_API_VER_CURRENT MRC_API_VER(1, 0, 0)
#define MRC_VENDOR_API_VER_LAST_SUPPORTED MRC_API_VER(1, 0, 0)

/* An application may pin the API it was written against; by default it gets the latest. */
#ifndef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_VER_LATEST
#endif
#if MRC_API_VER_USED != MRC_API_VER_LATEST && MRC_API_VER_USED > MRC_API_VER_CURRENT
#error "MRC_API_VER_USED is newer than this library's API (MRC_API_VER_CURRENT)"
#endif
#if MRC_API_VER_USED == MRC_API_VER_LAST_SUPPORTED
#warning "MRC_API_VER_USED is the oldest supported API version (0.0.0); it will be dropped"
#endif

#endif /* MRC_API_VER_H */
