// A real `llmrun serve` process: it prints its port, serves, and on SIGTERM
// stops taking requests, ends the in-flight stream, and exits 0 in seconds.
#include "server_fixture.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace llmc::test {
namespace {

struct ServeProcess {
  pid_t pid = -1;
  int stderrFd = -1;
  int port = 0;
  std::string log;

  // Starts llmrun serve on a free port; waits (bounded) for the "serving" line.
  bool start(const std::vector<std::string> &extra) {
    int pipeFds[2];
    if (pipe(pipeFds) != 0)
      return false;
    std::vector<std::string> args = {LLMC_BINARY_DIR "/tools/llmrun", "serve", defaultModelPlan(),
                                     "--port", "0", "--threads", "1", "--served-model-name",
                                     "tiny"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid = fork();
    if (pid == 0) {
      dup2(pipeFds[1], 2);
      close(pipeFds[0]);
      std::vector<char *> argv;
      for (std::string &a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(pipeFds[1]);
    stderrFd = pipeFds[0];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{stderrFd, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char buffer[512];
        ssize_t n = read(stderrFd, buffer, sizeof buffer);
        if (n <= 0)
          return false;
        log.append(buffer, static_cast<size_t>(n));
        size_t at = log.find("on http://127.0.0.1:");
        if (at != std::string::npos && log.find(' ', at + 20) != std::string::npos) {
          port = std::stoi(log.substr(at + 20));
          return true;
        }
      }
    }
    return false;
  }

  // Waits up to `seconds` for the exit; returns the exit status, or -1.
  int wait(double seconds) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  ~ServeProcess() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (stderrFd >= 0)
      close(stderrFd);
  }
};

TEST(ServeProcess, SigtermDrainsAndExitsZero) {
  ServeProcess serve;
  ASSERT_TRUE(serve.start({"--drain-seconds", "1"})) << serve.log;
  // A short request finishes; a long one is streaming when SIGTERM comes.
  httplib::Client client("127.0.0.1", serve.port);
  Json shortRequest = {{"prompt", "Once"}, {"max_tokens", 4}, {"ignore_eos", true}};
  auto answer = client.Post("/v1/completions", shortRequest.dump(), "application/json");
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  Stream stream;
  std::thread longClient([&] {
    Json request = {{"prompt", "Once upon"}, {"max_tokens", 400}, {"ignore_eos", true},
                    {"stream", true}};
    stream = streamPost(serve.port, "/v1/completions", request);
  });
  // Wait until the stream is flowing.
  for (int i = 0; i < 500 && stream.raw.empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto signalled = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(serve.pid, SIGTERM), 0);
  int code = serve.wait(10.0);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  longClient.join();
  EXPECT_EQ(code, 0) << serve.log;
  EXPECT_LT(seconds, 8.0);
  // The stream ended properly: a finish chunk, then [DONE].
  ASSERT_FALSE(stream.events.empty());
  EXPECT_EQ(stream.events.back(), "[DONE]");
  // Nobody listens any more.
  httplib::Client after("127.0.0.1", serve.port);
  after.set_connection_timeout(1, 0);
  EXPECT_FALSE(after.Get("/health"));
}

TEST(ServeProcess, BadFlagFailsWithAnError) {
  ServeProcess serve;
  EXPECT_FALSE(serve.start({"--kv-cache-tokens", "0"}));
  int code = serve.wait(10.0);
  EXPECT_NE(code, 0);
  EXPECT_NE(serve.log.find("error:"), std::string::npos) << serve.log;
}

} // namespace
} // namespace llmc::test
