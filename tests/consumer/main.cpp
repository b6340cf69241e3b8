// A program that uses redlimit only through its installed interface: the public headers and
// pkg-config (or Meson's dependency('redlimit')). It must build without hiredis on the include
// path. Run with a Redis URL to talk to a server; without one it only reports the version.
#include <cstdio>
#include <redlimit/redlimit.hpp>

// Why: hiredis is private to the library; its flags (-I.../hiredis) would put its generic header
// names (hiredis.h, net.h, read.h, sds.h) on this program's include path.
#if __has_include(<hiredis.h>) || __has_include(<sds.h>)
#error "hiredis's headers are on a consumer's include path: redlimit's flags leak them"
#endif

namespace {

redlimit::Task<std::string> ping(redlimit::Client& client) {
  const redlimit::Reply reply = co_await client.command("PING");
  co_await client.close();
  co_return reply.as_string();
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("redlimit %s\n", redlimit::version);
  if (argc < 2) return 0;
  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 0;
  {
    redlimit::Client client(&loop, redlimit::ClientOptions{.url = argv[1]});
    try {
      std::printf("%s\n", redlimit::run(&loop, ping(client)).c_str());
    } catch (const redlimit::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      redlimit::run(&loop, client.close());
      status = 1;
    }
  }
  return uv_loop_close(&loop) == 0 ? status : 2;
}
