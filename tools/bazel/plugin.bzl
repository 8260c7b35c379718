"""A shared-library plugin that leaves out what its host binary links.

plugin_objects gathers everything `deps` link, minus every library that
`host` links already, into one CcInfo for a cc_binary(linkshared = 1). The
plugin then holds only its own code and resolves the rest against the host
executable (linked with -rdynamic) when it is opened, so that one copy of
each shared piece exists in the process: two copies of generated protobuf
code, for one, would register the same .proto twice and abort.

The rule also proves the point of the plugin: it fails the build if `host`
links any of `forbidden_in_host` (the CUDA libraries), so the host binary
cannot start mapping them again without someone noticing.
"""

def _link_flags(linker_input):
    return " ".join(linker_input.user_link_flags)

def _plugin_objects_impl(ctx):
    host_owners = {}
    for dep in ctx.attr.host:
        for li in dep[CcInfo].linking_context.linker_inputs.to_list():
            host_owners[li.owner] = True
            flags = _link_flags(li)
            for lib in ctx.attr.forbidden_in_host:
                if lib in flags:
                    fail("%s links %s into the host binary (through %s); " %
                         (dep.label, lib, li.owner) +
                         "CUDA libraries belong in the GPU plugin only")
    merged = cc_common.merge_cc_infos(
        cc_infos = [d[CcInfo] for d in ctx.attr.deps],
    )
    kept = [
        li
        for li in merged.linking_context.linker_inputs.to_list()
        if li.owner not in host_owners
    ]
    if not kept:
        fail("plugin_objects %s: every library of deps is in host" % ctx.label)
    return [CcInfo(
        compilation_context = merged.compilation_context,
        linking_context = cc_common.create_linking_context(
            linker_inputs = depset(kept, order = "topological"),
        ),
    )]

plugin_objects = rule(
    implementation = _plugin_objects_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "host": attr.label_list(providers = [CcInfo]),
        "forbidden_in_host": attr.string_list(),
    },
    provides = [CcInfo],
)
