// A transport per link class in one communicator: peers on this host over
// one transport (intra: shm by default), peers on other hosts over another
// (inter: ucx where every rank has RDMA, else tcp). HETCCL_TRANSPORT (or
// the config's transport) says which: "auto", one name for every link, or
// "intra=shm,inter=tcp" (a class left out is auto).
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/transport.h"

namespace hetccl {

struct TransportChoice {
  std::string intra = "auto";  // auto, shm, tcp, ucx, ofi, net
  std::string inter = "auto";  // auto, tcp, ucx, ofi, net
};

// Parses the setting's text; throws InvalidArgument naming `what` (the
// setting or config field) on a malformed value, an unknown transport, or
// shm across hosts.
TransportChoice parseTransportChoice(const std::string& text, const char* what);

// Routes each transfer by its peer: remoteHost[r] nonzero sends rank r's
// transfers to `inter`, the others to `intra`. A run() with transfers of
// both classes moves them at once: the inter part on a thread of this
// transport's own while the caller moves the intra part (one after the
// other could deadlock: a peer may wait on the part not yet started). A
// part that fails poisons the other transport, so that its waits (and the
// peers') end instead of running to their timeout.
class RoutedTransport : public Transport {
 public:
  RoutedTransport(std::unique_ptr<Transport> intra, std::unique_ptr<Transport> inter, std::vector<uint8_t> remoteHost);
  ~RoutedTransport() override;
  const char* name() const override { return name_.c_str(); }
  void run(std::span<Xfer> xfers) override;
  void drain() override;
  void forgetLazy() override;
  void poison(const std::string& why) override;

 private:
  void worker();
  std::unique_ptr<Transport> intra_, inter_;
  std::vector<uint8_t> remote_;
  std::string name_;
  std::vector<Xfer> local_, far_;
  // The inter part handed to the worker thread.
  std::mutex mu_;
  std::condition_variable cv_;
  bool posted_ = false, finished_ = false, stop_ = false;
  std::exception_ptr farError_;
  std::thread thread_;
};

}  // namespace hetccl
