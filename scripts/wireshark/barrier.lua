-- Wireshark/tshark dissector for netbarrier's barrier frame (docs/wire-format.md), wire format
-- version 2 (Wireshark 4.0's Lua 5.2: no bitwise operators, so arithmetic): EtherType 0x88B5, magic 0xBA, version, kind, flags, group, epoch, sequence,
-- tx timestamp, header checksum (RFC 1071 over bytes 14..40 of the frame), padding.
--
-- Install: copy to ~/.local/lib/wireshark/plugins/ (Wireshark 4.0's personal plugin folder;
-- the install script is to do it), or load it for one run:
--   tshark -X lua_script:scripts/wireshark/barrier.lua -r capture.pcap
-- Display filters: barrier, barrier.group == 7, barrier.kind == 2, barrier.checksum.status == 0
-- (0 bad, 1 good), barrier.flags.retransmit == 1.

local barrier = Proto("barrier", "netbarrier barrier frame")

local MAGIC = 0xBA
local VERSION = 2
local HEADER_LEN = 26 -- magic .. checksum: bytes 14..40 of the frame
local MAX_GROUPS = 0x100000

local kinds = { [1] = "reduce", [2] = "release", [3] = "abort" }
local ABORT = 3
local status_names = { [0] = "Bad", [1] = "Good" }

local f = {
    magic = ProtoField.uint8("barrier.magic", "Magic", base.HEX),
    version = ProtoField.uint8("barrier.version", "Version", base.DEC),
    kind = ProtoField.uint8("barrier.kind", "Kind", base.DEC, kinds),
    flags = ProtoField.uint8("barrier.flags", "Flags", base.HEX),
    retransmit = ProtoField.bool("barrier.flags.retransmit", "Retransmit", 8, nil, 0x01),
    has_ts = ProtoField.bool("barrier.flags.has_timestamp", "Has timestamp", 8, nil, 0x02),
    reserved = ProtoField.uint8("barrier.flags.reserved", "Reserved", base.HEX, nil, 0xFC),
    group = ProtoField.uint32("barrier.group", "Group", base.DEC),
    epoch = ProtoField.uint32("barrier.epoch", "Epoch", base.DEC),
    seq = ProtoField.uint32("barrier.seq", "Sequence", base.DEC),
    ts = ProtoField.uint64("barrier.tx_timestamp", "Tx timestamp (ns)", base.DEC),
    abort_switch = ProtoField.ether("barrier.abort.switch", "Declaring switch"),
    abort_port = ProtoField.uint8("barrier.abort.port", "Failed port", base.DEC),
    abort_reserved = ProtoField.uint8("barrier.abort.reserved", "Reserved", base.HEX),
    checksum = ProtoField.uint16("barrier.checksum", "Header checksum", base.HEX),
    checksum_status = ProtoField.uint8("barrier.checksum.status", "Checksum status", base.DEC,
        status_names),
    padding = ProtoField.bytes("barrier.padding", "Padding"),
}
barrier.fields = {
    f.magic, f.version, f.kind, f.flags, f.retransmit, f.has_ts, f.reserved, f.group, f.epoch,
    f.seq, f.ts, f.abort_switch, f.abort_port, f.abort_reserved, f.checksum, f.checksum_status,
    f.padding,
}

local e = {
    bad_checksum = ProtoExpert.new("barrier.checksum.bad", "Bad header checksum",
        expert.group.CHECKSUM, expert.severity.WARN),
    bad_magic = ProtoExpert.new("barrier.magic.bad", "Not a barrier frame (magic is not 0xBA)",
        expert.group.MALFORMED, expert.severity.WARN),
    bad_version = ProtoExpert.new("barrier.version.bad", "Unknown wire format version",
        expert.group.MALFORMED, expert.severity.WARN),
    bad_kind = ProtoExpert.new("barrier.kind.bad", "Reserved kind", expert.group.MALFORMED,
        expert.severity.WARN),
    reserved_flags = ProtoExpert.new("barrier.flags.reserved.set", "Reserved flag bits set",
        expert.group.MALFORMED, expert.severity.WARN),
    group_range = ProtoExpert.new("barrier.group.range", "Group number >= 2^20",
        expert.group.MALFORMED, expert.severity.WARN),
    too_short = ProtoExpert.new("barrier.short", "Shorter than the 26-byte barrier header",
        expert.group.MALFORMED, expert.severity.WARN),
}
barrier.experts = {
    e.bad_checksum, e.bad_magic, e.bad_version, e.bad_kind, e.reserved_flags, e.group_range,
    e.too_short,
}

-- RFC 1071 over the header as the receiver checks it: the ones' complement sum of its thirteen
-- big-endian words, the stored checksum included, must be 0xFFFF.
local function header_sum(tvb)
    local sum = 0
    for i = 0, HEADER_LEN - 2, 2 do
        sum = sum + tvb(i, 2):uint()
    end
    while sum > 0xFFFF do
        sum = (sum % 0x10000) + math.floor(sum / 0x10000)
    end
    return sum
end

-- The checksum the sender should have stored: the complement of the sum with the field at 0.
local function expected_checksum(tvb)
    local sum = header_sum(tvb) + (0xFFFF - tvb(24, 2):uint())
    while sum > 0xFFFF do
        sum = (sum % 0x10000) + math.floor(sum / 0x10000)
    end
    return 0xFFFF - sum
end

function barrier.dissector(tvb, pinfo, tree)
    pinfo.cols.protocol = "BARRIER"
    local t = tree:add(barrier, tvb(0, math.min(tvb:len(), HEADER_LEN)))
    if tvb:len() < HEADER_LEN then
        t:add_proto_expert_info(e.too_short)
        pinfo.cols.info = "Barrier frame, truncated"
        return
    end
    local magic = tvb(0, 1):uint()
    local mi = t:add(f.magic, tvb(0, 1))
    if magic ~= MAGIC then
        mi:add_proto_expert_info(e.bad_magic)
    end
    local version = tvb(1, 1):uint()
    local vi = t:add(f.version, tvb(1, 1))
    if version ~= VERSION then
        vi:add_proto_expert_info(e.bad_version)
    end
    local kind = tvb(2, 1):uint()
    local ki = t:add(f.kind, tvb(2, 1))
    if kinds[kind] == nil then
        ki:add_proto_expert_info(e.bad_kind)
    end
    local flags = tvb(3, 1):uint()
    local fi = t:add(f.flags, tvb(3, 1))
    fi:add(f.retransmit, tvb(3, 1))
    fi:add(f.has_ts, tvb(3, 1))
    local ri = fi:add(f.reserved, tvb(3, 1))
    if flags >= 0x04 then
        ri:add_proto_expert_info(e.reserved_flags)
    end
    local group = tvb(4, 4):uint()
    local gi = t:add(f.group, tvb(4, 4))
    if group >= MAX_GROUPS then
        gi:add_proto_expert_info(e.group_range)
    end
    local epoch = tvb(8, 4):uint()
    t:add(f.epoch, tvb(8, 4))
    local seq = tvb(12, 4):uint()
    t:add(f.seq, tvb(12, 4))
    local failure = ""
    if kind == ABORT then
        -- an abort carries its failure where the others carry a timestamp
        t:add(f.abort_switch, tvb(16, 6))
        t:add(f.abort_port, tvb(22, 1))
        local ri2 = t:add(f.abort_reserved, tvb(23, 1))
        if tvb(23, 1):uint() ~= 0 or math.floor(flags / 2) % 2 == 1 then
            ri2:add_proto_expert_info(e.bad_kind)
        end
        failure = string.format(" failed=port %d of %s", tvb(22, 1):uint(),
            tostring(tvb(16, 6):ether()))
    else
        t:add(f.ts, tvb(16, 8))
    end
    local stored = tvb(24, 2):uint()
    local ci = t:add(f.checksum, tvb(24, 2))
    local good = header_sum(tvb) == 0xFFFF
    if good then
        ci:append_text(" [correct]")
    else
        ci:append_text(string.format(" [incorrect, should be 0x%04x]", expected_checksum(tvb)))
    end
    local si = t:add(f.checksum_status, tvb(24, 2), good and 1 or 0)
    si:set_generated()
    if not good then
        ci:add_proto_expert_info(e.bad_checksum)
    end
    if tvb:len() > HEADER_LEN then
        t:add(f.padding, tvb(HEADER_LEN))
    end

    local kind_name = kinds[kind] or string.format("kind %d", kind)
    local flag_text = ""
    if flags % 2 == 1 then
        flag_text = flag_text .. " retransmit"
    end
    if math.floor(flags / 2) % 2 == 1 then
        flag_text = flag_text .. " timestamped"
    end
    pinfo.cols.info = string.format("%s group=%d epoch=%d seq=%d%s%s%s", kind_name, group,
        epoch, seq, failure, flag_text, good and "" or " [BAD CHECKSUM]")
    t:append_text(string.format(", %s, group %d, epoch %d, seq %d", kind_name, group, epoch, seq))
    return tvb:len()
end

DissectorTable.get("ethertype"):add(0x88B5, barrier)
