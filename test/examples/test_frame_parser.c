/* SPDX-License-Identifier: MIT */
/* Tests of the firmware example docs/examples/frame_parser.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frame_parser.h"

struct sink {
	unsigned count;
	uint8_t len[512];
	uint8_t data[512][FP_MAX_PAYLOAD];
};

static void collect(struct fp_parser *p, const uint8_t *payload, uint8_t len)
{
	struct sink *s = p->ctx;
	s->len[s->count] = len;
	memcpy(s->data[s->count], payload, len);
	s->count++;
}

static void feed(struct fp_parser *p, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fp_feed(p, b[i]);
}

static struct sink sink;

static int setup(void **state)
{
	(void)state;
	memset(&sink, 0, sizeof sink);
	return 0;
}

static void test_single_frame(void **state)
{
	struct fp_parser p;
	uint8_t f[FP_MAX_PAYLOAD + 3];
	unsigned n = fp_encode(f, (const uint8_t *)"abc", 3);
	(void)state;
	assert_int_equal(n, 6);
	assert_int_equal(f[0], FP_SOF);
	assert_int_equal(f[1], 3);
	fp_init(&p, collect, &sink);
	feed(&p, f, n);
	assert_int_equal(sink.count, 1);
	assert_int_equal(sink.len[0], 3);
	assert_memory_equal(sink.data[0], "abc", 3);
	assert_int_equal(p.frames, 1);
	assert_int_equal(p.crc_errors + p.len_errors + p.dropped, 0);
}

static void test_known_crc(void **state)
{
	/* CRC-8/SMBUS check value: "123456789" -> 0xF4 */
	uint8_t crc = 0;
	(void)state;
	for (const char *c = "123456789"; *c; c++)
		crc = fp_crc8(crc, (uint8_t)*c);
	assert_int_equal(crc, 0xF4);
}

static void test_noise_bad_crc_bad_len(void **state)
{
	struct fp_parser p;
	uint8_t f[FP_MAX_PAYLOAD + 3];
	unsigned n;
	(void)state;
	fp_init(&p, collect, &sink);
	feed(&p, (const uint8_t *)"\x01\x02\x03", 3); /* noise */
	assert_int_equal(p.dropped, 3);
	n = fp_encode(f, (const uint8_t *)"bad", 3);
	f[n - 1] ^= 0x55;
	feed(&p, f, n);
	assert_int_equal(p.crc_errors, 1);
	assert_int_equal(sink.count, 0);
	/* length 0, then a length above the maximum whose byte is a start */
	feed(&p, (const uint8_t *)"\x7E\x00", 2);
	assert_int_equal(p.len_errors, 1);
	fp_feed(&p, FP_SOF);
	fp_feed(&p, FP_MAX_PAYLOAD + 1);
	assert_int_equal(p.len_errors, 2);
	/* the parser resynchronises on the next frame */
	n = fp_encode(f, (const uint8_t *)"ok", 2);
	feed(&p, f, n);
	assert_int_equal(sink.count, 1);
	assert_memory_equal(sink.data[0], "ok", 2);
}

static void test_start_byte_inside_payload(void **state)
{
	struct fp_parser p;
	uint8_t payload[4] = { FP_SOF, FP_SOF, 0x00, FP_SOF }, f[16];
	unsigned n = fp_encode(f, payload, 4);
	(void)state;
	fp_init(&p, collect, &sink);
	feed(&p, f, n);
	feed(&p, f, n);
	assert_int_equal(sink.count, 2);
	assert_memory_equal(sink.data[1], payload, 4);
}

static void test_bad_length_byte_is_a_start(void **state)
{
	/* SOF, then SOF as length (126 > max): that byte starts the real frame */
	struct fp_parser p;
	uint8_t f[16];
	unsigned n = fp_encode(f, (const uint8_t *)"x", 1);
	(void)state;
	fp_init(&p, collect, &sink);
	fp_feed(&p, FP_SOF);
	feed(&p, f, n);
	assert_int_equal(p.len_errors, 1);
	assert_int_equal(sink.count, 1);
}

static void test_random_stream(void **state)
{
	/* 300 random frames between random noise (noise never holds a start
	 * byte, so every good frame must come out, in order, intact) */
	struct fp_parser p;
	static uint8_t want[300][FP_MAX_PAYLOAD];
	static uint8_t wlen[300];
	uint8_t f[FP_MAX_PAYLOAD + 3];
	unsigned seed = 12345, corrupted = 0, good = 0;
	(void)state;
	fp_init(&p, collect, &sink);
	for (int i = 0; i < 300; i++) {
		unsigned noise = rand_r(&seed) % 4, n;
		uint8_t len = (uint8_t)(1 + rand_r(&seed) % FP_MAX_PAYLOAD), buf[FP_MAX_PAYLOAD];
		for (unsigned k = 0; k < noise; k++)
			fp_feed(&p, (uint8_t)(rand_r(&seed) % 0x7E));
		for (unsigned k = 0; k < len; k++)
			buf[k] = (uint8_t)rand_r(&seed);
		n = fp_encode(f, buf, len);
		if (rand_r(&seed) % 10 == 0) {
			f[n - 1] ^= 0x01;
			corrupted++;
		} else {
			memcpy(want[good], buf, len);
			wlen[good++] = len;
		}
		feed(&p, f, n);
	}
	assert_int_equal(p.crc_errors, corrupted);
	assert_int_equal(sink.count, good);
	for (unsigned i = 0; i < good; i++) {
		assert_int_equal(sink.len[i], wlen[i]);
		assert_memory_equal(sink.data[i], want[i], wlen[i]);
	}
}

static void test_encode_rejects(void **state)
{
	uint8_t f[FP_MAX_PAYLOAD + 8], big[FP_MAX_PAYLOAD + 1] = { 0 };
	(void)state;
	assert_int_equal(fp_encode(f, big, 0), 0);
	assert_int_equal(fp_encode(f, big, FP_MAX_PAYLOAD + 1), 0);
	assert_int_equal(fp_encode(f, big, FP_MAX_PAYLOAD), FP_MAX_PAYLOAD + 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_single_frame, setup),
		cmocka_unit_test_setup(test_known_crc, setup),
		cmocka_unit_test_setup(test_noise_bad_crc_bad_len, setup),
		cmocka_unit_test_setup(test_start_byte_inside_payload, setup),
		cmocka_unit_test_setup(test_bad_length_byte_is_a_start, setup),
		cmocka_unit_test_setup(test_random_stream, setup),
		cmocka_unit_test_setup(test_encode_rejects, setup),
	};
	return cmocka_run_group_tests_name("frame_parser", tests, NULL, NULL);
}
