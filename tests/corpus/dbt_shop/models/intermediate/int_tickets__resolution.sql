with tickets as (

    select * from {{ ref('stg_support__tickets') }}

),

comments as (

    select
        ticket_id,
        count(*) as comment_count,
        min(case when author_role = 'agent' and is_public then commented_at end) as first_replied_at
    from {{ ref('stg_support__ticket_comments') }}
    group by ticket_id

)

select
    tickets.ticket_id,
    tickets.requester_email,
    tickets.priority,
    tickets.ticket_status,
    tickets.ticket_channel,
    tickets.opened_at,
    tickets.solved_at,
    comments.comment_count,
    comments.first_replied_at,
    datediff('minute', tickets.opened_at, comments.first_replied_at) as minutes_to_first_reply,
    datediff('hour', tickets.opened_at, tickets.solved_at) as hours_to_solve
from tickets
left join comments
    on tickets.ticket_id = comments.ticket_id
