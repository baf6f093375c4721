"""Protocol Buffers and gRPC C++ code generation with Debian's protoc and grpc_cpp_plugin.

kvstore builds offline, so instead of @com_google_protobuf's rules a genrule
runs the system compilers and a cc_library wraps their output.
"""

def kv_proto_cc_library(name, srcs, deps = [], grpc = True, visibility = None, **kwargs):
    """C++ messages (and gRPC stubs when grpc = True) for the .proto files in srcs.

    Generated headers are included as "<package>/<file>.pb.h" and
    "<package>/<file>.grpc.pb.h". deps are other kv_proto_cc_library targets
    whose .proto files srcs import.
    """
    outs = []
    for src in srcs:
        if not src.endswith(".proto"):
            fail("kv_proto_cc_library: not a .proto file: " + src)
        stem = src[:-len(".proto")]
        outs += [stem + ".pb.h", stem + ".pb.cc"]
        if grpc:
            outs += [stem + ".grpc.pb.h", stem + ".grpc.pb.cc"]

    # The .proto files of this target and everything it imports, so that
    # imports resolve inside the sandbox.
    native.filegroup(
        name = name + "_protos",
        srcs = srcs + [dep + "_protos" for dep in deps],
        visibility = visibility,
    )

    cmd = "$(location @system//:protoc) --proto_path=. --cpp_out=$(GENDIR)"
    tools = ["@system//:protoc"]
    if grpc:
        cmd += (" --plugin=protoc-gen-grpc=$(location @system//:grpc_cpp_plugin)" +
                " --grpc_out=$(GENDIR)")
        tools.append("@system//:grpc_cpp_plugin")
    cmd += " " + " ".join(["$(location %s)" % src for src in srcs])

    native.genrule(
        name = name + "_gen",
        srcs = srcs + [name + "_protos"],
        outs = outs,
        cmd = cmd,
        tools = tools,
        message = "protoc %s" % " ".join(srcs),
    )

    native.cc_library(
        name = name,
        srcs = [out for out in outs if out.endswith(".cc")],
        hdrs = [out for out in outs if out.endswith(".h")],
        deps = ["@system//:protobuf"] + (["@system//:grpcpp"] if grpc else []) + deps,
        visibility = visibility,
        **kwargs
    )
