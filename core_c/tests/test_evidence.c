/* test_evidence.c - C-level tests of one worker's eviction evidence (lh_evidence.h), built and
 * run under AddressSanitizer and UndefinedBehaviorSanitizer by tests/test_core_sanitized.py.
 *
 * Written against the header's contract: golden cases (stored, removed, stored again, cleared,
 * several events of one batch in order, expiry at the exact bucket boundaries for several ring
 * sizes with and without the aged filter, forget and the restart of batch numbering, stats);
 * every error path, each shown to change nothing (every stats field and every lookup compared
 * with the state before); a random differential against a naive model kept in this file (plain
 * arrays, linear search) over keys crafted to collide in the tables and wrap around their end;
 * and a growth test with more than a million digests across many table doublings, removals,
 * expiry and a clear. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_hash.h"
#include "lh_test.h"
#include "litehit.h"

/* Allocation failures must come back as NULL (-> LH_ENOMEM), not abort the sanitized program. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

#define STORED 0
#define REMOVED 1
#define CLEARED 2

/* ---------------------------------------------------------------------------------------------
 * helpers */

static lh_evidence *new_set(uint32_t ring, uint32_t filter_log2_bits) {
  lh_evidence *ev = NULL;
  char err[LH_ERR_LEN] = "";
  int st = lh_evidence_create(&ev, ring, filter_log2_bits, 0, err, sizeof err);
  CHECK(st == LH_OK && ev != NULL);
  if (st != LH_OK) fprintf(stderr, "  create(%u, %u): %s\n", ring, filter_log2_bits, err);
  return ev;
}

/* Applies a batch; a failure must say why (err non-empty). Returns the status. */
static int apply(lh_evidence *ev, uint32_t batch, const uint8_t *kinds, const int64_t *offsets, size_t n_events,
                 const int64_t *digests, char *err, size_t errlen) {
  err[0] = '\0';
  int st = lh_evidence_apply(ev, batch, kinds, offsets, n_events, digests, err, errlen);
  if (st != LH_OK) CHECK(err[0] != '\0');
  return st;
}

/* Applies a batch of one event that must succeed. */
static void apply1(lh_evidence *ev, uint32_t batch, uint8_t kind, const int64_t *digests, size_t n) {
  int64_t offsets[2] = {0, (int64_t)n};
  char err[LH_ERR_LEN];
  int st = apply(ev, batch, &kind, offsets, 1, digests, err, sizeof err);
  CHECK(st == LH_OK);
  if (st != LH_OK) fprintf(stderr, "  apply(batch %u, kind %u): %s\n", batch, kind, err);
}

static void apply_one_digest(lh_evidence *ev, uint32_t batch, uint8_t kind, int64_t digest) {
  apply1(ev, batch, kind, &digest, kind == CLEARED ? 0 : 1);
}

static void expect_at(int line, lh_evidence *ev, int64_t digest, uint8_t kind, uint32_t batch) {
  uint8_t k = 99;
  uint32_t b = 99;
  lh_evidence_lookup(ev, &digest, 1, &k, &b);
  if (k != kind || b != batch) {
    fprintf(stderr, "%s:%d: digest %lld: got kind %u batch %u, want kind %u batch %u\n", __FILE__, line,
            (long long)digest, k, b, kind, batch);
    failures++;
  }
}
#define EXPECT(ev, digest, kind, batch) expect_at(__LINE__, (ev), (digest), (kind), (batch))

static lh_evidence_stats stats_of(lh_evidence *ev) {
  lh_evidence_stats s;
  lh_evidence_get_stats(ev, 1, &s);
  return s;
}

static int same_stats(const lh_evidence_stats *a, const lh_evidence_stats *b) {
  return a->resident == b->resident && a->evidence == b->evidence && a->expired == b->expired &&
         a->filter_bits == b->filter_bits && a->filter_set == b->filter_set && a->filter_inserts == b->filter_inserts &&
         a->resident_bytes == b->resident_bytes && a->evidence_bytes == b->evidence_bytes &&
         a->filter_bytes == b->filter_bytes && a->bucket == b->bucket && a->last_batch == b->last_batch;
}

/* The inverse of lh_mix64 (lh_hash.h), which the tables and the filter hash with: unmix(h) is a
 * digest whose table home is h & mask, so keys can be made to collide. */
static uint64_t inverse_odd(uint64_t c) {
  uint64_t inv = c; /* Newton: each step doubles the correct low bits (c * c == 1 mod 8) */
  for (int i = 0; i < 6; i++) inv *= 2 - c * inv;
  return inv;
}

static uint64_t unmix64(uint64_t x) {
  x ^= (x >> 31) ^ (x >> 62);
  x *= inverse_odd(0x94d049bb133111ebULL);
  x ^= (x >> 27) ^ (x >> 54);
  x *= inverse_odd(0xbf58476d1ce4e5b9ULL);
  x ^= (x >> 30) ^ (x >> 60);
  return x;
}

/* A digest whose home in a table of 64 (128, ...) slots is `home` (mod 64): high bits random. */
static int64_t digest_at_home(unsigned home) { return (int64_t)unmix64((rnd() << 6) | (home & 63u)); }

/* ---------------------------------------------------------------------------------------------
 * golden cases */

static void test_store_remove_store(void) {
  lh_evidence *ev = new_set(3, 0);
  if (ev == NULL) return;
  int64_t two[2] = {10, 20};
  EXPECT(ev, 10, LH_EVIDENCE_ABSENT, 0);
  apply1(ev, 1, STORED, two, 2);
  EXPECT(ev, 10, LH_EVIDENCE_RESIDENT, 1);
  EXPECT(ev, 20, LH_EVIDENCE_RESIDENT, 1);
  apply_one_digest(ev, 2, REMOVED, 10);
  EXPECT(ev, 10, LH_EVIDENCE_REMOVED, 2);
  EXPECT(ev, 20, LH_EVIDENCE_RESIDENT, 1);
  apply_one_digest(ev, 5, STORED, 10); /* batch numbers may skip */
  EXPECT(ev, 10, LH_EVIDENCE_RESIDENT, 5);
  lh_evidence_stats s = stats_of(ev);
  CHECK(s.resident == 2 && s.evidence == 1); /* the removal evidence stays, hidden by residence */
  CHECK(s.last_batch == 5 && s.bucket == 0 && s.expired == 0);
  apply_one_digest(ev, 6, REMOVED, 10);
  EXPECT(ev, 10, LH_EVIDENCE_REMOVED, 6); /* the latest removal */
  apply_one_digest(ev, 7, REMOVED, 99);   /* a removal of a digest never stored is evidence too */
  EXPECT(ev, 99, LH_EVIDENCE_REMOVED, 7);
  apply_one_digest(ev, 8, STORED, 20); /* stored while resident: the latest store */
  EXPECT(ev, 20, LH_EVIDENCE_RESIDENT, 8);
  s = stats_of(ev);
  CHECK(s.resident == 1 && s.evidence == 2 && s.last_batch == 8);

  /* events of one batch apply in order */
  uint8_t kinds[4] = {STORED, REMOVED, REMOVED, STORED};
  int64_t offsets[5] = {0, 2, 3, 4, 5};
  int64_t digests[5] = {30, 31, 30, 32, 32}; /* 30 stored then removed, 32 removed then stored */
  char err[LH_ERR_LEN];
  CHECK(apply(ev, 9, kinds, offsets, 4, digests, err, sizeof err) == LH_OK);
  EXPECT(ev, 30, LH_EVIDENCE_REMOVED, 9);
  EXPECT(ev, 31, LH_EVIDENCE_RESIDENT, 9);
  EXPECT(ev, 32, LH_EVIDENCE_RESIDENT, 9);
  /* duplicates within one event, and an empty batch (it still takes the batch number) */
  int64_t dup[3] = {40, 40, 40};
  apply1(ev, 10, STORED, dup, 3);
  EXPECT(ev, 40, LH_EVIDENCE_RESIDENT, 10);
  CHECK(apply(ev, 11, NULL, NULL, 0, NULL, err, sizeof err) == LH_OK);
  s = stats_of(ev);
  CHECK(s.last_batch == 11 && s.resident == 4 && s.evidence == 4);
  CHECK(apply(ev, 11, NULL, NULL, 0, NULL, err, sizeof err) == LH_EINVAL);
  /* extreme digests are ordinary digests */
  int64_t extremes[4] = {0, -1, INT64_MIN, INT64_MAX};
  apply1(ev, 12, STORED, extremes, 4);
  apply1(ev, 13, REMOVED, extremes + 2, 2);
  EXPECT(ev, 0, LH_EVIDENCE_RESIDENT, 12);
  EXPECT(ev, -1, LH_EVIDENCE_RESIDENT, 12);
  EXPECT(ev, INT64_MIN, LH_EVIDENCE_REMOVED, 13);
  EXPECT(ev, INT64_MAX, LH_EVIDENCE_REMOVED, 13);
  EXPECT(ev, 1, LH_EVIDENCE_ABSENT, 0);
  /* a lookup of many digests at once */
  int64_t many[5] = {10, 20, 0, INT64_MIN, 12345};
  uint8_t got_k[5];
  uint32_t got_b[5];
  lh_evidence_lookup(ev, many, 5, got_k, got_b);
  const uint8_t want_k[5] = {LH_EVIDENCE_REMOVED, LH_EVIDENCE_RESIDENT, LH_EVIDENCE_RESIDENT, LH_EVIDENCE_REMOVED,
                             LH_EVIDENCE_ABSENT};
  const uint32_t want_b[5] = {6, 8, 12, 13, 0};
  CHECK(memcmp(got_k, want_k, sizeof want_k) == 0);
  CHECK(memcmp(got_b, want_b, sizeof want_b) == 0);
  lh_evidence_lookup(ev, NULL, 0, NULL, NULL); /* nothing to look up */
  lh_evidence_destroy(ev);
  lh_evidence_destroy(NULL);
}

static void test_cleared(void) {
  lh_evidence *ev = new_set(2, 0);
  if (ev == NULL) return;
  char err[LH_ERR_LEN];
  apply_one_digest(ev, 1, CLEARED, 0); /* clearing nothing */
  lh_evidence_stats s = stats_of(ev);
  CHECK(s.resident == 0 && s.evidence == 0 && s.last_batch == 1);
  int64_t three[3] = {1, 2, 3};
  apply1(ev, 2, STORED, three, 3);
  apply_one_digest(ev, 3, REMOVED, 7); /* earlier evidence of a digest not resident */
  /* batch 4: stored 4, removed 2, cleared, stored 5 */
  uint8_t kinds[4] = {STORED, REMOVED, CLEARED, STORED};
  int64_t offsets[5] = {0, 1, 2, 2, 3};
  int64_t digests[3] = {4, 2, 5};
  CHECK(apply(ev, 4, kinds, offsets, 4, digests, err, sizeof err) == LH_OK);
  EXPECT(ev, 1, LH_EVIDENCE_REMOVED, 4);
  EXPECT(ev, 2, LH_EVIDENCE_REMOVED, 4);
  EXPECT(ev, 3, LH_EVIDENCE_REMOVED, 4);
  EXPECT(ev, 4, LH_EVIDENCE_REMOVED, 4); /* stored earlier in the clearing batch */
  EXPECT(ev, 5, LH_EVIDENCE_RESIDENT, 4);
  EXPECT(ev, 7, LH_EVIDENCE_REMOVED, 3); /* not resident: its evidence is untouched */
  s = stats_of(ev);
  CHECK(s.resident == 1 && s.evidence == 5);
  /* two clears in one batch, and a clear of a set whose resident table has grown */
  int64_t big[300];
  for (int i = 0; i < 300; i++) big[i] = 1000 + i;
  uint8_t kinds2[3] = {CLEARED, STORED, CLEARED};
  int64_t offsets2[4] = {0, 0, 300, 300};
  CHECK(apply(ev, 5, kinds2, offsets2, 3, big, err, sizeof err) == LH_OK);
  s = stats_of(ev);
  CHECK(s.resident == 0 && s.evidence == 306);
  EXPECT(ev, 5, LH_EVIDENCE_REMOVED, 5);
  for (int i = 0; i < 300; i++) EXPECT(ev, big[i], LH_EVIDENCE_REMOVED, 5);
  apply1(ev, 6, STORED, big, 10); /* the cleared table takes digests again */
  for (int i = 0; i < 10; i++) EXPECT(ev, big[i], LH_EVIDENCE_RESIDENT, 6);
  EXPECT(ev, big[10], LH_EVIDENCE_REMOVED, 5);
  CHECK(stats_of(ev).resident == 10);
  lh_evidence_destroy(ev);
}

/* A removal filed in bucket b is retained through advance(b + R - 1) and gone at advance(b + R). */
static void test_expiry_boundaries(void) {
  const uint32_t rings[] = {1, 2, 3, 7, 64};
  const uint64_t starts[] = {0, 5, 1000003, UINT64_MAX / 2};
  for (size_t r = 0; r < sizeof rings / sizeof *rings; r++) {
    for (size_t f = 0; f < 2; f++) {
      for (size_t t = 0; t < sizeof starts / sizeof *starts; t++) {
        for (int stepwise = 0; stepwise < 2; stepwise++) {
          uint32_t R = rings[r], filter = f ? 10 : 0;
          uint8_t gone = f ? LH_EVIDENCE_AGED : LH_EVIDENCE_ABSENT;
          uint64_t b = starts[t];
          /* with R == 1, advance(b + 1) already expires 43's first removal (batch 3) */
          uint64_t early = R == 1 ? 1 : 0, per_insert = f ? 1 : 0;
          lh_evidence *ev = new_set(R, filter);
          if (ev == NULL) return;
          lh_evidence_advance(ev, b);
          apply_one_digest(ev, 1, STORED, 50); /* resident, later removed in b + 1 */
          apply_one_digest(ev, 2, REMOVED, 42);
          apply_one_digest(ev, 3, REMOVED, 43); /* two batches in bucket b */
          lh_evidence_advance(ev, b + 1);
          apply_one_digest(ev, 4, REMOVED, 50);
          apply_one_digest(ev, 5, REMOVED, 43); /* 43 removed again: retained with bucket b + 1 */
          if (stepwise) {
            for (uint64_t x = b + 1; x < b + R; x++) {
              lh_evidence_advance(ev, x);
              EXPECT(ev, 42, LH_EVIDENCE_REMOVED, 2);
            }
          } else {
            lh_evidence_advance(ev, b + R - 1);
          }
          lh_evidence_advance(ev, b); /* backwards: ignored */
          CHECK(stats_of(ev).bucket == (R > 1 ? b + R - 1 : b + 1));
          if (R > 1) EXPECT(ev, 42, LH_EVIDENCE_REMOVED, 2);
          EXPECT(ev, 43, LH_EVIDENCE_REMOVED, 5);
          EXPECT(ev, 50, LH_EVIDENCE_REMOVED, 4);
          lh_evidence_advance(ev, b + R);
          EXPECT(ev, 42, gone, 0);
          EXPECT(ev, 43, LH_EVIDENCE_REMOVED, 5);
          EXPECT(ev, 50, LH_EVIDENCE_REMOVED, 4);
          lh_evidence_stats s = stats_of(ev);
          CHECK(s.expired == 1 + early && s.evidence == 2 && s.bucket == b + R);
          CHECK(s.filter_inserts == (1 + early) * per_insert);
          lh_evidence_advance(ev, b + R); /* the same bucket again: nothing more expires */
          CHECK(stats_of(ev).expired == 1 + early);
          lh_evidence_advance(ev, b + R + 1);
          EXPECT(ev, 43, gone, 0);
          EXPECT(ev, 50, gone, 0);
          s = stats_of(ev);
          CHECK(s.expired == 3 + early && s.evidence == 0 && s.resident == 0);
          CHECK(s.filter_inserts == (3 + early) * per_insert);
          /* stored again after aging: resident; removed again: fresh evidence */
          apply_one_digest(ev, 6, STORED, 42);
          EXPECT(ev, 42, LH_EVIDENCE_RESIDENT, 6);
          apply_one_digest(ev, 7, REMOVED, 42);
          EXPECT(ev, 42, LH_EVIDENCE_REMOVED, 7);
          lh_evidence_advance(ev, b + 2 * R); /* removed in bucket b + R + 1: retained */
          EXPECT(ev, 42, LH_EVIDENCE_REMOVED, 7);
          lh_evidence_advance(ev, b + 3 * R + 5); /* a jump over many buckets */
          EXPECT(ev, 42, gone, 0);
          CHECK(stats_of(ev).expired == 4 + early);
          lh_evidence_destroy(ev);
        }
      }
    }
  }
  /* a resident digest whose removal evidence expires stays resident (and is counted expired) */
  lh_evidence *ev = new_set(2, 8);
  if (ev == NULL) return;
  apply_one_digest(ev, 1, REMOVED, 9);
  apply_one_digest(ev, 2, STORED, 9);
  lh_evidence_advance(ev, 2);
  EXPECT(ev, 9, LH_EVIDENCE_RESIDENT, 2);
  lh_evidence_stats s = stats_of(ev);
  CHECK(s.expired == 1 && s.evidence == 0 && s.resident == 1 && s.filter_inserts == 1);
  apply_one_digest(ev, 3, REMOVED, 9);
  EXPECT(ev, 9, LH_EVIDENCE_REMOVED, 3);
  /* buckets that saw no batch: the retained window is still counted in buckets */
  lh_evidence_advance(ev, 3);
  EXPECT(ev, 9, LH_EVIDENCE_REMOVED, 3);
  lh_evidence_advance(ev, 4);
  EXPECT(ev, 9, LH_EVIDENCE_AGED, 0);
  lh_evidence_destroy(ev);
}

static void test_forget(void) {
  for (int f = 0; f < 2; f++) {
    uint8_t gone = f ? LH_EVIDENCE_AGED : LH_EVIDENCE_ABSENT;
    lh_evidence *ev = new_set(3, f ? 12 : 0);
    if (ev == NULL) return;
    lh_evidence_forget(ev); /* of an empty set */
    CHECK(stats_of(ev).filter_inserts == 0);
    int64_t two[2] = {1, 2};
    lh_evidence_advance(ev, 7);
    apply1(ev, 1, STORED, two, 2);
    apply_one_digest(ev, 2, REMOVED, 2);
    apply_one_digest(ev, 3, REMOVED, 3);
    apply_one_digest(ev, 4, STORED, 3); /* resident and with evidence: put in twice */
    lh_evidence_forget(ev);
    lh_evidence_stats s = stats_of(ev);
    CHECK(s.resident == 0 && s.evidence == 0 && s.last_batch == 0 && s.bucket == 7 && s.expired == 0);
    CHECK(s.filter_inserts == (f ? 4u : 0u));
    CHECK(s.resident_bytes == 0 && s.evidence_bytes == 0);
    EXPECT(ev, 1, gone, 0);
    EXPECT(ev, 2, gone, 0);
    EXPECT(ev, 3, gone, 0);
    EXPECT(ev, 77, LH_EVIDENCE_ABSENT, 0); /* 4 inserts in 4096 bits: no false positive here */
    /* numbering restarts at 1; removals after the restart follow the ring from scratch */
    apply_one_digest(ev, 1, STORED, 1);
    apply_one_digest(ev, 2, REMOVED, 2);
    EXPECT(ev, 1, LH_EVIDENCE_RESIDENT, 1);
    EXPECT(ev, 2, LH_EVIDENCE_REMOVED, 2);
    lh_evidence_advance(ev, 9);
    EXPECT(ev, 2, LH_EVIDENCE_REMOVED, 2);
    lh_evidence_advance(ev, 10);
    EXPECT(ev, 2, gone, 0);
    s = stats_of(ev);
    CHECK(s.last_batch == 2 && s.resident == 1 && s.evidence == 0 && s.expired == 1);
    CHECK(s.filter_inserts == (f ? 5u : 0u));
    lh_evidence_destroy(ev);
  }
}

static void test_stats(void) {
  lh_evidence *ev = new_set(5, 16);
  if (ev == NULL) return;
  lh_evidence_stats s = stats_of(ev);
  CHECK(s.resident == 0 && s.evidence == 0 && s.expired == 0 && s.filter_set == 0 && s.filter_inserts == 0);
  CHECK(s.filter_bits == 65536 && s.filter_bytes == 8192);
  CHECK(s.resident_bytes == 0 && s.evidence_bytes == 0 && s.bucket == 0 && s.last_batch == 0);
  /* fresh distinct digests only: the tables stay 45-90 % full, 13.3 to 26.7 bytes an entry */
  int64_t d[97];
  uint32_t batch = 0;
  for (int round = 0; round < 200; round++) {
    size_t n = 1 + (size_t)(rnd() % 97);
    for (size_t i = 0; i < n; i++) d[i] = (int64_t)rnd();
    apply1(ev, ++batch, round % 3 ? STORED : REMOVED, d, n);
    s = stats_of(ev);
    size_t caps[2] = {s.resident_bytes / 12, s.evidence_bytes / 12};
    size_t counts[2] = {s.resident, s.evidence};
    for (int t = 0; t < 2; t++) {
      CHECK(caps[t] * 12 == (t ? s.evidence_bytes : s.resident_bytes));
      CHECK((caps[t] & (caps[t] - 1)) == 0); /* a power of two */
      CHECK(counts[t] * 10 <= caps[t] * 9);
      if (counts[t] >= 64) {
        double per_entry = (double)(caps[t] * 12) / (double)counts[t];
        CHECK(per_entry >= 13.3 && per_entry <= 26.7);
      }
    }
  }
  CHECK(s.resident >= 64 && s.evidence >= 64);
  lh_evidence_advance(ev, 5);
  s = stats_of(ev);
  CHECK(s.evidence == 0 && s.expired == s.filter_inserts && s.expired > 0 && s.bucket == 5);
  CHECK(s.filter_set > 0 && s.filter_set <= 3 * s.filter_inserts && s.filter_set <= s.filter_bits);
  lh_evidence_destroy(ev);
}

/* ---------------------------------------------------------------------------------------------
 * errors: each must change nothing */

#define PROBES 16
static const int64_t probe_digests[PROBES] = {1, 2, 3, 4, 5, 6, 7, 8, 100, 101, 102, 103, 0, -1, 555, 556};

typedef struct snapshot {
  lh_evidence_stats stats;
  uint8_t kinds[PROBES];
  uint32_t batches[PROBES];
} snapshot;

static snapshot take(lh_evidence *ev) {
  snapshot s;
  memset(&s, 0, sizeof s);
  s.stats = stats_of(ev);
  lh_evidence_lookup(ev, probe_digests, PROBES, s.kinds, s.batches);
  return s;
}

static void expect_unchanged_at(int line, lh_evidence *ev, const snapshot *before) {
  snapshot now = take(ev);
  if (!same_stats(&now.stats, &before->stats) || memcmp(now.kinds, before->kinds, sizeof now.kinds) != 0 ||
      memcmp(now.batches, before->batches, sizeof now.batches) != 0) {
    fprintf(stderr, "%s:%d: a failed call changed the evidence set\n", __FILE__, line);
    failures++;
  }
}

/* A failing apply: LH_EINVAL, a message containing `says`, nothing changed. */
static void expect_rejected_at(int line, lh_evidence *ev, uint32_t batch, const uint8_t *kinds, const int64_t *offsets,
                               size_t n_events, const int64_t *digests, const char *says) {
  snapshot before = take(ev);
  char err[LH_ERR_LEN];
  int st = apply(ev, batch, kinds, offsets, n_events, digests, err, sizeof err);
  if (st != LH_EINVAL || strstr(err, says) == NULL) {
    fprintf(stderr, "%s:%d: got status %d \"%s\", want LH_EINVAL saying \"%s\"\n", __FILE__, line, st, err, says);
    failures++;
  }
  expect_unchanged_at(line, ev, &before);
}
#define EXPECT_REJECTED(ev, batch, kinds, offsets, n, digests, says) \
  expect_rejected_at(__LINE__, (ev), (batch), (kinds), (offsets), (n), (digests), (says))

static void test_errors(void) {
  lh_evidence *ev = new_set(2, 10);
  if (ev == NULL) return;
  int64_t some[6] = {1, 2, 3, 4, 5, 6};
  apply1(ev, 1, STORED, some, 6);
  apply1(ev, 2, REMOVED, some, 2);
  lh_evidence_advance(ev, 2); /* 1 and 2 aged */
  apply1(ev, 3, REMOVED, some + 2, 1);
  apply1(ev, 4, STORED, probe_digests + 8, 4);
  snapshot before = take(ev);
  CHECK(before.kinds[0] == LH_EVIDENCE_AGED && before.kinds[2] == LH_EVIDENCE_REMOVED);
  CHECK(before.kinds[3] == LH_EVIDENCE_RESIDENT && before.stats.last_batch == 4);

  /* big valid first events: if anything were applied (or reserved) before the error, it shows */
  static int64_t big[500];
  for (int i = 0; i < 500; i++) big[i] = 100 + i;
  uint8_t kinds[3] = {STORED, REMOVED, STORED};
  int64_t offsets[4] = {0, 450, 500, 500};
  EXPECT_REJECTED(ev, 4, kinds, offsets, 3, big, "batch"); /* not increasing */
  EXPECT_REJECTED(ev, 3, kinds, offsets, 3, big, "batch"); /* decreasing */
  EXPECT_REJECTED(ev, 0, kinds, offsets, 3, big, "batch"); /* 0 is never a batch */
  EXPECT_REJECTED(ev, LH_EVIDENCE_MAX_BATCH + 1u, kinds, offsets, 3, big, "batch");
  EXPECT_REJECTED(ev, UINT32_MAX, kinds, offsets, 3, big, "batch");
  EXPECT_REJECTED(ev, 4, NULL, NULL, 0, NULL, "batch"); /* even with no events */
  uint8_t bad_kind[3] = {STORED, REMOVED, 3};
  EXPECT_REJECTED(ev, 5, bad_kind, offsets, 3, big, "kind");
  bad_kind[2] = 255;
  EXPECT_REJECTED(ev, 5, bad_kind, offsets, 3, big, "kind");
  int64_t decreasing[4] = {0, 450, 400, 500};
  EXPECT_REJECTED(ev, 5, kinds, decreasing, 3, big, "offsets");
  int64_t not_zero[4] = {1, 450, 500, 500};
  EXPECT_REJECTED(ev, 5, kinds, not_zero, 3, big, "offsets[0]");
  int64_t negative[4] = {-1, 450, 500, 500};
  EXPECT_REJECTED(ev, 5, kinds, negative, 3, big, "offsets[0]");
  uint8_t clear_with[3] = {STORED, REMOVED, CLEARED};
  int64_t clear_offsets[4] = {0, 450, 499, 500};
  EXPECT_REJECTED(ev, 5, clear_with, clear_offsets, 3, big, "cleared");
  EXPECT_REJECTED(ev, 5, NULL, offsets, 3, big, "NULL");
  EXPECT_REJECTED(ev, 5, kinds, NULL, 3, big, "NULL");
  EXPECT_REJECTED(ev, 5, kinds, offsets, 3, NULL, "NULL");
  /* NULL digests are fine when no event takes any */
  uint8_t clears[2] = {CLEARED, STORED};
  int64_t empty_offsets[3] = {0, 0, 0};
  char err[LH_ERR_LEN];
  CHECK(apply(ev, 5, clears, empty_offsets, 2, NULL, err, sizeof err) == LH_OK);
  EXPECT(ev, 100, LH_EVIDENCE_REMOVED, 5);

  /* the largest batch is accepted, then nothing more until forget */
  apply_one_digest(ev, LH_EVIDENCE_MAX_BATCH, STORED, 7);
  EXPECT(ev, 7, LH_EVIDENCE_RESIDENT, LH_EVIDENCE_MAX_BATCH);
  CHECK(stats_of(ev).last_batch == LH_EVIDENCE_MAX_BATCH);
  EXPECT_REJECTED(ev, LH_EVIDENCE_MAX_BATCH, kinds, offsets, 3, big, "batch");
  EXPECT_REJECTED(ev, LH_EVIDENCE_MAX_BATCH + 1u, kinds, offsets, 3, big, "batch");
  lh_evidence_advance(ev, 3); /* expiry with the largest batch applied */
  EXPECT(ev, 7, LH_EVIDENCE_RESIDENT, LH_EVIDENCE_MAX_BATCH);
  lh_evidence_forget(ev);
  apply_one_digest(ev, 1, STORED, 7);
  EXPECT(ev, 7, LH_EVIDENCE_RESIDENT, 1);
  lh_evidence_destroy(ev);

  /* create: bad arguments leave *out untouched */
  const uint32_t bad[][2] = {{0, 0}, {0, 10}, {1, 1}, {1, 5}, {1, 41}, {3, 64}, {3, UINT32_MAX}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    lh_evidence *sentinel = (lh_evidence *)&failures, *out = sentinel;
    char msg[LH_ERR_LEN] = "";
    CHECK(lh_evidence_create(&out, bad[i][0], bad[i][1], 0, msg, sizeof msg) == LH_EINVAL);
    CHECK(out == sentinel);
    CHECK(strstr(msg, bad[i][0] == 0 ? "ring_buckets" : "filter_log2_bits") != NULL);
  }
  char msg[LH_ERR_LEN] = "";
  CHECK(lh_evidence_create(NULL, 3, 0, 0, msg, sizeof msg) == LH_EINVAL && msg[0] != '\0');
  lh_evidence *edge = new_set(1, 6); /* the smallest filter: one word */
  if (edge != NULL) {
    apply_one_digest(edge, 1, REMOVED, 5);
    lh_evidence_advance(edge, 1);
    EXPECT(edge, 5, LH_EVIDENCE_AGED, 0);
    CHECK(stats_of(edge).filter_bits == 64 && stats_of(edge).filter_bytes == 8);
    lh_evidence_destroy(edge);
  }
}

/* ---------------------------------------------------------------------------------------------
 * random differential against a naive model */

#define NKEYS 61

typedef struct model {
  uint32_t ring;
  int filter;
  uint64_t bucket;
  uint32_t last_batch;
  int64_t keys[NKEYS];
  uint32_t resident[NKEYS]; /* the batch that stored it, 0: not resident */
  uint32_t removed[NKEYS];  /* the batch of its latest retained removal, 0: none */
  uint64_t removed_bucket[NKEYS];
  uint8_t aged[NKEYS];
  uint64_t expired, inserts;
} model;

static size_t model_find(const model *m, int64_t digest) {
  for (size_t i = 0; i < NKEYS; i++) {
    if (m->keys[i] == digest) return i;
  }
  fprintf(stderr, "model: unknown digest %lld\n", (long long)digest);
  abort();
}

static void model_advance(model *m, uint64_t bucket) {
  if (bucket < m->bucket) return;
  m->bucket = bucket;
  for (size_t i = 0; i < NKEYS; i++) {
    if (m->removed[i] && bucket >= m->ring - 1 && m->removed_bucket[i] < bucket - (m->ring - 1)) {
      m->removed[i] = 0;
      m->aged[i] = 1;
      m->expired++;
      m->inserts += m->filter ? 1 : 0;
    }
  }
}

static void model_apply(model *m, uint32_t batch, const uint8_t *kinds, const int64_t *offsets, size_t n_events,
                        const int64_t *digests) {
  m->last_batch = batch;
  for (size_t e = 0; e < n_events; e++) {
    for (int64_t j = offsets[e]; j < offsets[e + 1]; j++) {
      size_t i = model_find(m, digests[j]);
      if (kinds[e] == STORED) {
        m->resident[i] = batch;
      } else {
        m->resident[i] = 0;
        m->removed[i] = batch;
        m->removed_bucket[i] = m->bucket;
      }
    }
    if (kinds[e] == CLEARED) {
      for (size_t i = 0; i < NKEYS; i++) {
        if (m->resident[i]) {
          m->resident[i] = 0;
          m->removed[i] = batch;
          m->removed_bucket[i] = m->bucket;
        }
      }
    }
  }
}

static void model_forget(model *m) {
  for (size_t i = 0; i < NKEYS; i++) {
    int n = (m->resident[i] != 0) + (m->removed[i] != 0);
    if (n) m->aged[i] = 1;
    m->inserts += m->filter ? (uint64_t)n : 0;
    m->resident[i] = m->removed[i] = 0;
  }
  m->last_batch = 0;
}

/* Compares every key and the counters; returns the number of false positives (model: absent,
 * engine: aged). */
static size_t compare(const model *m, lh_evidence *ev, long step) {
  uint8_t kinds[NKEYS];
  uint32_t batches[NKEYS];
  size_t false_positives = 0, resident = 0, removed = 0;
  lh_evidence_lookup(ev, m->keys, NKEYS, kinds, batches);
  for (size_t i = 0; i < NKEYS; i++) {
    uint8_t want = LH_EVIDENCE_ABSENT;
    uint32_t want_batch = 0;
    if (m->resident[i]) {
      want = LH_EVIDENCE_RESIDENT;
      want_batch = m->resident[i];
    } else if (m->removed[i]) {
      want = LH_EVIDENCE_REMOVED;
      want_batch = m->removed[i];
    } else if (m->aged[i] && m->filter) {
      want = LH_EVIDENCE_AGED;
    }
    resident += m->resident[i] != 0;
    removed += m->removed[i] != 0;
    if (want == LH_EVIDENCE_ABSENT && kinds[i] == LH_EVIDENCE_AGED && m->filter && batches[i] == 0) {
      false_positives++;
      continue;
    }
    if (kinds[i] != want || batches[i] != want_batch) {
      fprintf(stderr, "step %ld (ring %u, filter %d): key %zu (%lld): got %u/%u, want %u/%u\n", step, m->ring,
              m->filter, i, (long long)m->keys[i], kinds[i], batches[i], want, want_batch);
      failures++;
      return false_positives;
    }
  }
  lh_evidence_stats s = stats_of(ev);
  if (s.resident != resident || s.evidence != removed || s.expired != m->expired || s.filter_inserts != m->inserts ||
      s.bucket != m->bucket || s.last_batch != m->last_batch) {
    fprintf(stderr,
            "step %ld (ring %u): stats resident %zu/%zu evidence %zu/%zu expired %llu/%llu inserts %llu/%llu "
            "bucket %llu/%llu last_batch %u/%u\n",
            step, m->ring, s.resident, resident, s.evidence, removed, (unsigned long long)s.expired,
            (unsigned long long)m->expired, (unsigned long long)s.filter_inserts, (unsigned long long)m->inserts,
            (unsigned long long)s.bucket, (unsigned long long)m->bucket, s.last_batch, m->last_batch);
    failures++;
  }
  if (s.filter_set > s.filter_bits || s.filter_set > 3 * s.filter_inserts) failures++;
  return false_positives;
}

/* A random bad batch (at least one error), which must be rejected without a change. */
static void random_bad_apply(lh_evidence *ev, const model *m, long step) {
  uint8_t kinds[4] = {STORED, REMOVED, STORED, REMOVED};
  int64_t offsets[5] = {0, 2, 4, 6, 8};
  int64_t digests[8];
  for (int i = 0; i < 8; i++) digests[i] = m->keys[rnd() % NKEYS];
  uint32_t batch = m->last_batch + 1;
  const int64_t *d = digests;
  switch (rnd() % 6) {
    case 0: batch = m->last_batch - (uint32_t)(rnd() % (m->last_batch + 1)); break;
    case 1: kinds[rnd() % 4] = (uint8_t)(3 + rnd() % 253); break;
    case 2: {
      size_t at = 1 + (size_t)(rnd() % 3);
      offsets[at] = offsets[at - 1] - 1 - (int64_t)(rnd() % 2);
      break;
    }
    case 3: offsets[0] = 1 + (int64_t)(rnd() % 2); break;
    case 4: kinds[rnd() % 4] = CLEARED; break;
    default: d = NULL; break;
  }
  char err[LH_ERR_LEN];
  int st = apply(ev, batch, kinds, offsets, 4, d, err, sizeof err);
  if (st != LH_EINVAL) {
    fprintf(stderr, "step %ld: a bad batch got status %d\n", step, st);
    failures++;
  }
}

static void differential(uint32_t ring, uint32_t filter_log2_bits, long steps, uint64_t seed) {
  rng_state = seed;
  lh_evidence *ev = new_set(ring, filter_log2_bits);
  if (ev == NULL) return;
  model m;
  memset(&m, 0, sizeof m);
  m.ring = ring;
  m.filter = filter_log2_bits != 0;
  /* 48 keys crowded onto homes 56..63 and 0..3 of a 64-slot table (runs wrap around its end),
   * the extremes, and a few spread-out ones */
  for (size_t i = 0; i < NKEYS; i++) m.keys[i] = i < 48 ? digest_at_home((unsigned)(56 + rnd() % 12)) : (int64_t)rnd();
  m.keys[48] = 0;
  m.keys[49] = -1;
  m.keys[50] = INT64_MIN;
  m.keys[51] = INT64_MAX;
  for (size_t i = 0; i < NKEYS; i++) {
    for (size_t j = 0; j < i; j++) {
      if (m.keys[i] == m.keys[j]) m.keys[i] ^= (int64_t)1 << 40; /* keep them distinct */
    }
  }
  /* digests never put anywhere, to measure the filter's false positives */
  enum { NPROBES = 512 };
  int64_t probes[NPROBES];
  for (size_t i = 0; i < NPROBES; i++) probes[i] = (int64_t)(rnd() * 3 + 1000000007u);
  uint8_t pk[NPROBES];
  uint32_t pb[NPROBES];
  size_t probe_positives = 0, probe_lookups = 0, key_positives = 0;
  double expected_positives = 0;

  for (long step = 0; step < steps && failures < 20; step++) {
    uint64_t roll = rnd() % 100;
    if (roll < 50) {
      uint8_t kinds[4];
      int64_t offsets[5] = {0};
      int64_t digests[4 * 7];
      size_t n_events = rnd() % 5;
      for (size_t e = 0; e < n_events; e++) {
        uint64_t k = rnd() % 100;
        kinds[e] = k < 47 ? STORED : k < 94 ? REMOVED : CLEARED;
        size_t n = kinds[e] == CLEARED ? 0 : rnd() % 8;
        for (size_t j = 0; j < n; j++) digests[offsets[e] + (int64_t)j] = m.keys[rnd() % NKEYS];
        offsets[e + 1] = offsets[e] + (int64_t)n;
      }
      uint32_t batch = m.last_batch + 1 + (rnd() % 8 == 0 ? (uint32_t)(rnd() % 1000) : 0);
      char err[LH_ERR_LEN];
      int st = apply(ev, batch, kinds, offsets, n_events, digests, err, sizeof err);
      if (st != LH_OK) {
        fprintf(stderr, "step %ld: apply failed: %s\n", step, err);
        failures++;
      }
      model_apply(&m, batch, kinds, offsets, n_events, digests);
    } else if (roll < 88) {
      uint64_t k = rnd() % 100, bucket = m.bucket;
      if (k < 25) {
        /* the same bucket */
      } else if (k < 65) {
        bucket += 1;
      } else if (k < 90) {
        bucket += rnd() % (2 * (uint64_t)ring + 2);
      } else if (bucket > 0) {
        bucket -= 1 + rnd() % bucket; /* backwards: ignored */
      }
      lh_evidence_advance(ev, bucket);
      model_advance(&m, bucket);
    } else if (roll < 90) {
      lh_evidence_forget(ev);
      model_forget(&m);
    } else if (roll < 95) {
      random_bad_apply(ev, &m, step);
    }
    key_positives += compare(&m, ev, step);
    if (m.filter && step % 97 == 0) {
      lh_evidence_lookup(ev, probes, NPROBES, pk, pb);
      lh_evidence_stats s = stats_of(ev);
      double fill = (double)s.filter_set / (double)s.filter_bits;
      expected_positives += NPROBES * fill * fill * fill;
      probe_lookups += NPROBES;
      for (size_t i = 0; i < NPROBES; i++) {
        CHECK(pb[i] == 0 && (pk[i] == LH_EVIDENCE_ABSENT || pk[i] == LH_EVIDENCE_AGED));
        probe_positives += pk[i] == LH_EVIDENCE_AGED;
      }
    }
  }
  if (m.filter) {
    /* false positives: about as many as (set bits / bits)^3 predicts, and rare for a roomy filter */
    CHECK((double)probe_positives <= 2.0 * expected_positives + 20.0);
    CHECK((double)probe_positives >= 0.5 * expected_positives - 20.0);
    if (filter_log2_bits >= 12) {
      CHECK(probe_positives * 100 <= probe_lookups);
      CHECK(key_positives * 100 <= (size_t)steps * NKEYS); /* keys never aged, said to be aged */
    }
  }
  lh_evidence_destroy(ev);
}

static void test_differential(void) {
  const uint32_t rings[] = {1, 2, 3, 5, 13, 40};
  for (size_t r = 0; r < sizeof rings / sizeof *rings; r++) differential(rings[r], 0, 40000, 0x1234567 + r);
  differential(2, 12, 30000, 77);
  differential(7, 14, 30000, 78);
  differential(3, 7, 20000, 79); /* a crowded filter: still no false negatives */
}

/* Long probe runs that wrap the table's end, emptied one digest at a time: after every removal
 * (resident table) and every expiry (evidence table) every remaining digest is still found. */
static void test_wrapping_deletions(void) {
  enum { N = 56 };
  for (int round = 0; round < 200; round++) {
    lh_evidence *ev = new_set(3, 0);
    if (ev == NULL) return;
    int64_t keys[N];
    uint32_t stored_in[N], removed_in[N];
    uint64_t bucket_of[N];
    for (size_t i = 0; i < N; i++) {
      keys[i] = digest_at_home((unsigned)(60 + rnd() % 6)); /* homes 60..63, 0, 1 */
      for (size_t j = 0; j < i; j++) {
        if (keys[i] == keys[j]) keys[i] ^= 1 << 20;
      }
    }
    apply1(ev, 1, STORED, keys, N);
    CHECK(stats_of(ev).resident_bytes == 64 * 12); /* all in one 64-slot table */
    for (size_t i = 0; i < N; i++) stored_in[i] = 1, removed_in[i] = 0, bucket_of[i] = 0;
    uint32_t batch = 1;
    uint64_t bucket = 0;
    for (size_t left = N; left > 0; left--) {
      size_t pick = (size_t)(rnd() % N);
      while (stored_in[pick] == 0) pick = (pick + 1) % N;
      if (rnd() % 3 == 0) {
        lh_evidence_advance(ev, ++bucket);
        for (size_t i = 0; i < N; i++) {
          if (removed_in[i] && bucket_of[i] + 3 <= bucket) removed_in[i] = 0;
        }
      }
      apply_one_digest(ev, ++batch, REMOVED, keys[pick]);
      stored_in[pick] = 0;
      removed_in[pick] = batch;
      bucket_of[pick] = bucket;
      for (size_t i = 0; i < N; i++) {
        if (stored_in[i]) {
          EXPECT(ev, keys[i], LH_EVIDENCE_RESIDENT, 1);
        } else if (removed_in[i]) {
          EXPECT(ev, keys[i], LH_EVIDENCE_REMOVED, removed_in[i]);
        } else {
          EXPECT(ev, keys[i], LH_EVIDENCE_ABSENT, 0);
        }
      }
    }
    CHECK(stats_of(ev).resident == 0);
    lh_evidence_destroy(ev);
  }
}

/* ---------------------------------------------------------------------------------------------
 * growth */

static int64_t growth_digest(uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ULL; /* a bijection, not the tables' hash */
  x ^= x >> 29;
  return (int64_t)(x * 0xD6E8FEB86659FD93ULL);
}

enum { G_NONE, G_RESIDENT, G_REMOVED, G_AGED };

static size_t growth_check(lh_evidence *ev, const uint8_t *state, const uint32_t *batch, size_t n) {
  enum { CHUNK = 4096 };
  int64_t d[CHUNK];
  uint8_t k[CHUNK];
  uint32_t b[CHUNK];
  size_t wrong = 0;
  for (size_t start = 0; start < n; start += CHUNK) {
    size_t m = n - start < CHUNK ? n - start : CHUNK;
    for (size_t i = 0; i < m; i++) d[i] = growth_digest(start + i);
    lh_evidence_lookup(ev, d, m, k, b);
    for (size_t i = 0; i < m; i++) {
      uint8_t want = state[start + i] == G_RESIDENT  ? LH_EVIDENCE_RESIDENT
                     : state[start + i] == G_REMOVED ? LH_EVIDENCE_REMOVED
                     : state[start + i] == G_AGED    ? LH_EVIDENCE_AGED
                                                     : LH_EVIDENCE_ABSENT;
      uint32_t want_batch = want == LH_EVIDENCE_RESIDENT || want == LH_EVIDENCE_REMOVED ? batch[start + i] : 0;
      /* the filter may say aged of a digest never put in (rarely), never the reverse */
      if (want == LH_EVIDENCE_ABSENT && k[i] == LH_EVIDENCE_AGED && b[i] == 0) continue;
      if (k[i] != want || b[i] != want_batch) {
        if (wrong++ < 5) {
          fprintf(stderr, "growth: digest #%zu: got %u/%u, want %u/%u\n", start + i, k[i], b[i], want, want_batch);
        }
      }
    }
  }
  return wrong;
}

static void test_growth(void) {
  enum { N = 1200000, PER_BATCH = 100000 };
  uint8_t *state = calloc(N, 1);
  uint32_t *batch_of = calloc(N, sizeof *batch_of);
  int64_t *d = malloc(sizeof *d * PER_BATCH);
  lh_evidence *ev = new_set(4, 24);
  CHECK(state != NULL && batch_of != NULL && d != NULL);
  if (state == NULL || batch_of == NULL || d == NULL || ev == NULL) goto out;
  uint32_t batch = 0;

  /* bucket 0: every digest stored, a batch at a time; the resident table doubles ~15 times */
  for (size_t start = 0; start < N; start += PER_BATCH) {
    for (size_t i = 0; i < PER_BATCH; i++) d[i] = growth_digest(start + i), state[start + i] = G_RESIDENT;
    apply1(ev, ++batch, STORED, d, PER_BATCH);
    for (size_t i = 0; i < PER_BATCH; i++) batch_of[start + i] = batch;
  }
  lh_evidence_stats s = stats_of(ev);
  CHECK(s.resident == N);
  double per_entry = (double)s.resident_bytes / N;
  CHECK(per_entry >= 13.3 && per_entry <= 26.7);
  CHECK(growth_check(ev, state, batch_of, N) == 0);

  /* buckets 1 and 2: about half removed in batches of removal events (a third in each bucket) */
  size_t removed_in_1 = 0;
  uint32_t first_batch_of_2 = 0;
  for (uint64_t bucket = 1; bucket <= 2; bucket++) {
    lh_evidence_advance(ev, bucket);
    if (bucket == 2) first_batch_of_2 = batch + 1;
    size_t n = 0;
    for (size_t i = 0; i < N; i++) {
      if (state[i] != G_RESIDENT || rnd() % 3 != 0) continue;
      d[n++] = growth_digest(i);
      state[i] = G_REMOVED;
      batch_of[i] = batch + 1;
      removed_in_1 += bucket == 1;
      if (n == PER_BATCH) apply1(ev, ++batch, REMOVED, d, n), n = 0;
    }
    if (n) apply1(ev, ++batch, REMOVED, d, n);
  }
  s = stats_of(ev);
  size_t resident = 0, removed = 0;
  for (size_t i = 0; i < N; i++) resident += state[i] == G_RESIDENT, removed += state[i] == G_REMOVED;
  CHECK(s.resident == resident && s.evidence == removed && removed > N / 3);
  per_entry = (double)s.evidence_bytes / (double)s.evidence;
  CHECK(per_entry >= 13.3 && per_entry <= 26.7);
  CHECK(growth_check(ev, state, batch_of, N) == 0);

  /* some of the removed stored again (their removal evidence stays, hidden) */
  size_t n = 0;
  for (size_t i = 0; i < N && n < PER_BATCH; i++) {
    if (state[i] == G_REMOVED && rnd() % 4 == 0)
      d[n++] = growth_digest(i), state[i] = G_RESIDENT, batch_of[i] = batch + 1;
  }
  apply1(ev, ++batch, STORED, d, n);
  CHECK(stats_of(ev).evidence == removed);
  CHECK(growth_check(ev, state, batch_of, N) == 0);

  /* advance(5) with ring 4 retains buckets 2..5: bucket 1's removals expire (stored again or
   * not); backward-shift deletion from the evidence table must keep every other digest */
  lh_evidence_advance(ev, 5);
  for (size_t i = 0; i < N; i++) {
    if (state[i] == G_REMOVED && batch_of[i] < first_batch_of_2) state[i] = G_AGED, batch_of[i] = 0;
  }
  s = stats_of(ev);
  CHECK(s.expired == removed_in_1 && s.filter_inserts == removed_in_1); /* stored again ones expire too */
  CHECK(growth_check(ev, state, batch_of, N) == 0);

  /* a clear in bucket 5: every resident digest removed at the clearing batch */
  apply_one_digest(ev, ++batch, CLEARED, 0);
  for (size_t i = 0; i < N; i++) {
    if (state[i] == G_RESIDENT) state[i] = G_REMOVED, batch_of[i] = batch;
  }
  s = stats_of(ev);
  CHECK(s.resident == 0);
  CHECK(growth_check(ev, state, batch_of, N) == 0);

  /* everything expires */
  lh_evidence_advance(ev, 100);
  for (size_t i = 0; i < N; i++) {
    if (state[i] == G_REMOVED) state[i] = G_AGED, batch_of[i] = 0;
  }
  s = stats_of(ev);
  CHECK(s.evidence == 0 && s.resident == 0);
  CHECK(growth_check(ev, state, batch_of, N) == 0);
out:
  lh_evidence_destroy(ev);
  free(state);
  free(batch_of);
  free(d);
}

/* The timer's expiry: lh_evidence_sweep finishes a pass in steps (changing no answer), and
 * lh_evidence_trim gives the memory of emptied tables back, keeping every answer. */
static void test_sweep_and_trim(void) {
  enum { N = 20000, KEPT = 1000 };
  int64_t *d = malloc(sizeof *d * N);
  lh_evidence *ev = new_set(2, 10);
  CHECK(d != NULL && ev != NULL);
  if (d == NULL || ev == NULL) goto out;
  for (size_t i = 0; i < N; i++) d[i] = (int64_t)(i + 1);
  apply1(ev, 1, STORED, d, N);
  apply1(ev, 2, REMOVED, d, N); /* bucket 0 */
  lh_evidence_advance(ev, 1);
  apply1(ev, 3, STORED, d, KEPT);
  apply1(ev, 4, REMOVED, d, KEPT); /* the first KEPT digests again, in bucket 1 */
  lh_evidence_stats before;
  lh_evidence_get_stats(ev, 0, &before);
  CHECK(before.evidence == N && before.evidence_bytes == 32768 * 12);

  lh_evidence_advance(ev, 2);             /* retains buckets 1..2: bucket 0's removals expire (4096 slots swept) */
  size_t left = lh_evidence_sweep(ev, 0); /* a budget of 0 examines nothing */
  CHECK(left > 0 && left < 32768 && lh_evidence_sweep(ev, 0) == left);
  EXPECT(ev, N, LH_EVIDENCE_AGED, 0); /* answered aged before the sweep reaches it */
  EXPECT(ev, 1, LH_EVIDENCE_REMOVED, 4);
  size_t steps = 0;
  while ((left = lh_evidence_sweep(ev, 1000)) > 0) steps++;
  CHECK(steps >= 10); /* 1000 slots a step (a deleted entry's slot is examined again) */
  lh_evidence_stats s;
  lh_evidence_get_stats(ev, 0, &s);
  CHECK(s.evidence == KEPT && s.expired == N - KEPT && s.evidence_bytes == before.evidence_bytes);

  char err[LH_ERR_LEN] = "";
  CHECK(lh_evidence_trim(ev, err, sizeof err) == LH_OK);
  lh_evidence_get_stats(ev, 0, &s);
  CHECK(s.evidence == KEPT && s.evidence_bytes == 4096 * 12); /* KEPT x 2 fit at most 90 % full */
  CHECK(s.resident == 0 && s.resident_bytes == 0);            /* the emptied resident table is freed */
  for (size_t i = 0; i < N; i++) {
    if (i < KEPT) {
      EXPECT(ev, d[i], LH_EVIDENCE_REMOVED, 4);
    } else {
      EXPECT(ev, d[i], LH_EVIDENCE_AGED, 0);
    }
  }
  CHECK(lh_evidence_trim(ev, err, sizeof err) == LH_OK); /* as small as it gets: unchanged */
  lh_evidence_get_stats(ev, 0, &s);
  CHECK(s.evidence_bytes == 4096 * 12);

  lh_evidence_advance(ev, 10); /* everything expires, then the table is freed */
  while (lh_evidence_sweep(ev, 1000) > 0) {
  }
  CHECK(lh_evidence_trim(ev, err, sizeof err) == LH_OK);
  lh_evidence_get_stats(ev, 0, &s);
  CHECK(s.evidence == 0 && s.evidence_bytes == 0 && s.expired == N);
  EXPECT(ev, 1, LH_EVIDENCE_AGED, 0);
  CHECK(lh_evidence_sweep(ev, 1000) == 0);

  apply1(ev, 5, STORED, d, 10); /* a freed table grows again */
  apply1(ev, 6, REMOVED, d, 5);
  EXPECT(ev, 1, LH_EVIDENCE_REMOVED, 6);
  EXPECT(ev, 10, LH_EVIDENCE_RESIDENT, 5);
out:
  lh_evidence_destroy(ev);
  free(d);
}

int main(void) {
  CHECK(unmix64(lh_mix64(12345)) == 12345 && lh_mix64(unmix64(0xfeedULL)) == 0xfeedULL);
  test_store_remove_store();
  test_cleared();
  test_expiry_boundaries();
  test_forget();
  test_stats();
  test_errors();
  test_wrapping_deletions();
  test_differential();
  test_growth();
  test_sweep_and_trim();
  return finish("evidence");
}
