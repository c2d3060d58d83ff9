/* A user's file that includes coring first, then uses what glibc declares
 * by default under gcc's -std=gnu17 (usleep, strsep, MAP_ANONYMOUS, struct
 * tcphdr): coring's feature macro must not hide any of it, and under a
 * strict -std=c11 the same file must build too (test/core/compile_ok.sh). */
#include <coring/coring.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void)
{
	char buf[] = "a,b", *p = buf;
	struct tcphdr th;
	void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	memset(&th, 0, sizeof th);
	usleep(1);
	return strsep(&p, ",") == NULL || m == MAP_FAILED || sizeof(co_engine) == 0;
}
