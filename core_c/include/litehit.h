/* litehit.h - umbrella header of the LiteHit C library (what the cffi module includes).
 *
 * It includes exactly the public headers, the ones core_c/build_ffi.py generates the cffi
 * declarations from; the internal headers listed there are C-only and never included here. */
#ifndef LITEHIT_H
#define LITEHIT_H

#include "lh_common.h"
#include "lh_evidence.h"
#include "lh_facts.h"
#include "lh_hybrid.h"
#include "lh_lane.h"
#include "lh_normalize.h"
#include "lh_policy.h"
#include "lh_prefix_hash.h"
#include "lh_profile.h"
#include "lh_project.h"
#include "lh_query.h"
#include "lh_route.h"
#include "lh_tiers.h"
#include "lh_trace_format.h"
#include "lh_trace_scan.h"

#endif
