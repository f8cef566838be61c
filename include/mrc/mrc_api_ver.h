/* MRC application API versions: the macro set of OCP's mrc_api_ver.h (same names and values),
 * written for this project.
 *
 * A version is maj.min.sub packed as maj << 24 | min << 16 | sub. An application may define
 * MRC_API_VER_USED (and MRC_VENDOR_API_VER_USED) before including mrc.h to pin the API it was
 * written against; MRC_API_VER_LATEST selects the current one, which is also the default. A pinned
 * version outside [LAST_SUPPORTED, CURRENT] stops the build; the oldest one warns. */
#ifndef _MRC_API_VER_H_
#define _MRC_API_VER_H_

#define MRC_API_VER_MAJOR_OFFSET 24
#define MRC_API_VER_MINOR_OFFSET 16
#define MRC_API_VER_SUBMINOR_OFFSET 0

#define MRC_API_VER(maj, min, sub)                                             \
  (((maj) << MRC_API_VER_MAJOR_OFFSET) | ((min) << MRC_API_VER_MINOR_OFFSET) | \
   ((sub) << MRC_API_VER_SUBMINOR_OFFSET))

#define MRC_API_VER_LATEST MRC_API_VER(0xFF, 0xFF, 0xFFFF)

#define MRC_API_CURRENT_VERSION MRC_API_VER(1, 0, 1)
#define MRC_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#ifndef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#elif MRC_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#endif

#if MRC_API_VER_USED > MRC_API_CURRENT_VERSION
#error "MRC_API_VER_USED is newer than MRC_API_CURRENT_VERSION"
#elif MRC_API_VER_USED < MRC_API_LAST_SUPPORTED_VERSION
#error "MRC_API_VER_USED is older than MRC_API_LAST_SUPPORTED_VERSION"
#elif MRC_API_VER_USED == MRC_API_LAST_SUPPORTED_VERSION
#warning "MRC_API_VER_USED is the oldest supported version and may be dropped"
#endif

/* The vendor (provider) API: this implementation's own calls (mrc_open_device, mrc_progress, ...). */
#define MRC_VENDOR_API_CURRENT_VERSION MRC_API_VER(1, 0, 0)
#define MRC_VENDOR_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#ifndef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#elif MRC_VENDOR_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_VENDOR_API_VER_USED > MRC_VENDOR_API_CURRENT_VERSION
#error "MRC_VENDOR_API_VER_USED is newer than MRC_VENDOR_API_CURRENT_VERSION"
#elif MRC_VENDOR_API_VER_USED < MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_VENDOR_API_VER_USED is older than MRC_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_VENDOR_API_VER_USED == MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#warning "MRC_VENDOR_API_VER_USED is the oldest supported vendor version and may be dropped"
#endif

/* Extensions (not in OCP's header): the fields of a packed version, and the names this library's
 * first API used. */
#define MRC_API_VER_MAJOR(v) (((v) >> MRC_API_VER_MAJOR_OFFSET) & 0xFFu)
#define MRC_API_VER_MINOR(v) (((v) >> MRC_API_VER_MINOR_OFFSET) & 0xFFu)
#define MRC_API_VER_SUB(v) (((v) >> MRC_API_VER_SUBMINOR_OFFSET) & 0xFFFFu)
#define MRC_API_VER_CURRENT MRC_API_CURRENT_VERSION

#endif /* _MRC_API_VER_H_ */
